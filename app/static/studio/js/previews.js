// When the motion previews are rendered: they are background work and must never stand in the way
// of what the person asked for.
//
// - Background priority: each request says "Priority: u=7" (RFC 9218's lowest urgency). The server
//   gives such a request a render slot only when nothing else wants one, never queues it, and takes
//   the slot back (the preview answers 503) as soon as a render or a save needs it.
// - Held while the person's own work runs: hold() aborts the preview in flight and starts no other
//   until release().
// - Only what is on screen: the cards in view (an IntersectionObserver), the chosen one first.
// - Small and short (PREVIEW_SIZE px, at most PREVIEW_FRAMES frames), cached per character version
//   (the server caches the files too: a version's preview is rendered once).
// - A 503 (the slot went to a render) is waited out (Retry-After) and tried again, quietly.

import { ApiError, call, retrySeconds, sleep } from "./api.js";

export const PREVIEW_SIZE = 128; // px, the previews' side: small renders answer fast
// The whole clip in at most this many frames (max_frames): a choppier loop that renders in about half
// a full clip's time (the mesh setup is the rest).
export const PREVIEW_FRAMES = 40;
const PREVIEW_FORMAT = "gif"; // every browser loops a GIF in an <img>
const BACKGROUND = "u=7";

/** {motion: url} from the API's answer (the mapping itself, or under "animations"). */
export function urlsOf(answer) {
  const urls = answer?.animations ?? answer;
  return urls && typeof urls === "object" ? urls : {};
}

/** Resolves once `img` shows its first frame (after `src` is set), rejects if it cannot load. */
function firstFrame(img) {
  return new Promise((resolve, reject) => {
    img.addEventListener("load", () => requestAnimationFrame(() => resolve(performance.now())), { once: true });
    img.addEventListener("error", () => reject(new Error("the preview image did not load")), { once: true });
  });
}

export class Previews {
  /** `cards`: Map motion name -> {img, frame} (the picker's); `paused()`: true while previews wait. */
  constructor(cards, paused = () => false) {
    this.cards = cards;
    this.paused = paused;
    this.cache = new Map(); // "id@version/motion" -> url
    this.visible = new Set();
    this.doc = null;
    this.generation = 0;
    this.holds = 0;
    this.inFlight = null;
    this.wake = null;
    this.observer = typeof IntersectionObserver === "undefined" ? null : new IntersectionObserver((entries) => {
      for (const e of entries) {
        const name = e.target.dataset.motion;
        if (e.isIntersecting) this.visible.add(name);
        else this.visible.delete(name);
      }
      this.kick();
    }, { rootMargin: "64px" });
  }

  /** Watch the cards for being on screen (call after the picker built them). */
  watch() {
    this.observer?.disconnect();
    this.visible.clear();
    for (const [name, card] of this.cards) {
      card.frame.dataset.motion = name;
      if (this.observer) this.observer.observe(card.frame);
      else this.visible.add(name);
    }
  }

  /** Stop previews while the person's own work (a render) runs; the preview in flight is aborted. */
  hold() {
    this.holds += 1;
    this.inFlight?.abort();
  }

  release() {
    this.holds = Math.max(0, this.holds - 1);
    this.kick();
  }

  kick() {
    this.wake?.();
  }

  /**
   * Previews of `doc`: `first` at once (whether on screen or not: it is the chosen motion), then the
   * cards on screen one request at a time. Resolves with `{answered, playing}` for `first`: when the
   * API answered its URL and a promise of when it began to play (performance.now() times; null if a
   * newer call replaced it); rejects with `first`'s error. A newer call (the character changed)
   * stops this one.
   */
  async show(doc, first) {
    const generation = ++this.generation;
    this.doc = doc;
    this.inFlight?.abort();
    this.kick();
    for (const [name, card] of this.cards) {
      const url = this.cache.get(this.key(doc, name));
      if (url) this.display(name, url);
      else {
        card.frame.dataset.state = "loading";
        card.img.hidden = true;
      }
    }
    const current = () => generation === this.generation;
    let playing = null;
    let answered = performance.now();
    if (this.cards.has(first)) {
      const url = this.cache.get(this.key(doc, first)) || await this.fetch(doc, first, current, true);
      answered = performance.now();
      if (url && current()) playing = this.display(first, url);
    }
    this.pump(doc, current);
    return { answered, playing: playing ?? Promise.resolve(null) };
  }

  key(doc, name) {
    return `${doc.id}@${doc.version}/${name}`;
  }

  /** The cards on screen with no preview of `doc` yet, in the picker's order. */
  next(doc) {
    for (const name of this.cards.keys()) {
      if (this.visible.has(name) && !this.cache.has(this.key(doc, name)) &&
          this.cards.get(name).frame.dataset.state !== "failed") return name;
    }
    return null;
  }

  async pump(doc, current) {
    while (current()) {
      const name = this.holds || this.paused() ? null : this.next(doc);
      if (name === null) {
        await new Promise((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, 500); // the paused() condition changes without a kick
        });
        continue;
      }
      const url = await this.fetch(doc, name, current, false).catch(() => null);
      if (url && current()) this.display(name, url);
      else if (!url && current() && !this.holds) this.cards.get(name).frame.dataset.state = "failed";
    }
  }

  /**
   * The URL of `name`'s preview of `doc`, waiting out 503s (the slot went to a render); null when
   * a newer version replaced `doc` or a hold aborted the request. `head`: errors other than 503 are
   * raised (the chosen motion's preview), else they answer null.
   */
  async fetch(doc, name, current, head) {
    const json = { motions: [name], format: PREVIEW_FORMAT, size: PREVIEW_SIZE, max_frames: PREVIEW_FRAMES };
    const path = `characters/${encodeURIComponent(doc.id)}/animations`;
    while (current()) {
      while (current() && (this.holds || (!head && this.paused()))) await sleep(0.2);
      if (!current()) return null;
      const controller = new AbortController();
      this.inFlight = controller;
      try {
        const url = urlsOf(await call("POST", path, {
          json, signal: controller.signal, headers: { Priority: BACKGROUND }, priority: "low",
        }))[name];
        if (url) this.cache.set(this.key(doc, name), url);
        return url || null;
      } catch (err) {
        if (err instanceof ApiError && err.code === "aborted") continue; // held, or replaced: see above
        if (err instanceof ApiError && err.status === 503 && err.code !== "model_server_unavailable") {
          await sleep(retrySeconds(err, 1));
          continue;
        }
        if (head) throw err;
        return null;
      } finally {
        if (this.inFlight === controller) this.inFlight = null;
      }
    }
    return null;
  }

  /** Show `url` in `name`'s card; resolves when its first frame is on screen. */
  display(name, url) {
    const card = this.cards.get(name);
    if (!card) return null;
    card.img.hidden = false;
    if (card.img.getAttribute("src") === url && card.img.complete) {
      card.frame.dataset.state = "playing";
      return Promise.resolve(performance.now());
    }
    const playing = firstFrame(card.img);
    card.img.src = url;
    playing.then(() => { card.frame.dataset.state = "playing"; }, () => { card.frame.dataset.state = "failed"; });
    return playing;
  }
}

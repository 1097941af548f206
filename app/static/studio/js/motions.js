// The motion picker (the library by category, each motion with a small looping preview: the server's
// reference character at first, the person's own character once it is on screen) and the rendered
// animations with their download links. Previews never stand in the way of what the person asked
// for: background priority, held while a render runs, only cards on screen, cached per version.

import { ApiError, call, retrySeconds, sleep } from "./api.js";
import { renderJob } from "./jobs.js";

export const PREVIEW_SIZE = 128; // px, the previews' side: small renders answer fast
// The whole clip in at most this many frames (max_frames): a choppier loop that renders in about half
// a full clip's time (the mesh setup is the rest).
export const PREVIEW_FRAMES = 40;
const PREVIEW_FORMAT = "gif"; // every browser loops a GIF in an <img>
// Previews are background work (RFC 9218's lowest urgency): the server gives them a render slot only
// when nothing else wants one and takes it back (the preview answers 503) when a render or a save does.
const BACKGROUND = "u=7";
// The file each format downloads as, and how the page shows it: an <img>, a <video>, or (files a
// browser does not play: zips, JSON, a 3D model) a line saying what the download holds.
const EXTENSIONS = {
  gif: "gif", webp: "webp", mp4: "mp4", apng: "png", webm: "webm",
  sheet: "sheet.zip", frames: "frames.zip", joints: "joints.json", glb: "glb",
};
const VIDEOS = new Set(["mp4", "webm"]);
const IMAGES = new Set(["gif", "webp", "apng"]);
const DOWNLOADS = {
  sheet: "Sprite sheet (PNG) and its JSON Hash atlas, for Phaser, PixiJS or Godot",
  frames: "Every frame as a transparent PNG, with frames.json (size, durations, loop)",
  joints: "Each joint's position per frame (JSON), with the skeleton's parent links",
  glb: "The character as a rigged glTF model: textured mesh, skeleton, animation",
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (v !== false && v !== undefined) node.setAttribute(k, v === true ? "" : v);
  }
  node.append(...children);
  return node;
}

function animationsPath(doc) {
  return `characters/${encodeURIComponent(doc.id)}/animations`;
}

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

const CATEGORY_TITLES = { yours: "Your motions", dance: "Dance", funny: "Funny", jumping: "Jumping", walking: "Walking" };

export class MotionPicker {
  /** `paused()`: true while background previews should wait (the person is editing: a Save will
   * replace this version, so its previews would be wasted work on the server). */
  constructor(list, paused = () => false) {
    this.list = list;
    this.paused = paused;
    this.cards = new Map();
    this.generation = 0;
    this.onScreen = new Set(); // motion names whose card is (nearly) in the viewport
    this.waiting = []; // resolvers of preview loops waiting for a card to come on screen
    this.observer = new IntersectionObserver((entries) => {
      for (const e of entries) {
        const name = e.target.dataset.motion;
        if (e.isIntersecting) this.onScreen.add(name);
        else this.onScreen.delete(name);
      }
      this.wake();
    }, { rootMargin: "120px" });
    // For the bench and the tests: when this version's previews of the person's character began to play.
    this.shown = { generation: 0, started: 0, playing: [] };
    this.cache = new Map(); // "id@version/motion" -> URL: a version's preview is asked for once
    this.holds = 0; // > 0 while the person's own work (a render) runs: no preview is asked for
  }

  /**
   * Stop previews while the person's own work (a render) runs: the preview in flight is aborted, and
   * reference previews still loading are dropped for now (a fresh server makes each on its first
   * request, one at a time: the browser's few connections to the server would otherwise wait on
   * them, and the person's render behind them).
   */
  hold() {
    this.holds += 1;
    this.inFlight?.abort();
    for (const card of this.cards.values()) {
      if (!card.own && card.reference && card.img.getAttribute("src") && !card.img.complete) {
        card.img.removeAttribute("src");
        card.deferred = true;
      }
    }
  }

  /** The person's work is done: previews carry on, the reference previews dropped by hold() too. */
  release() {
    this.holds = Math.max(0, this.holds - 1);
    if (this.holds) return;
    for (const card of this.cards.values()) {
      if (card.deferred) {
        card.deferred = false;
        if (!card.own) card.img.src = card.reference;
      }
    }
    this.wake();
  }

  /** Stop this character's previews (another photo is being opened). */
  stop() {
    this.generation += 1;
    this.inFlight?.abort();
    this.wake();
  }

  /** Let every waiting preview loop look again (a card came on screen, or a newer call began). */
  wake() {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  /** Build one card per motion, grouped in `categories` ([{name, motions: [names]}], in order;
   * without them, one group); `checked` names start selected. Each card first shows the motion
   * played by the server's reference character (its `preview` URL, loaded when near the screen). */
  show(motions, checked, categories) {
    this.observer.disconnect();
    this.onScreen.clear();
    this.list.replaceChildren();
    this.cards.clear();
    const byName = new Map(motions.map((m) => [m.name, m]));
    const groups = categories?.length ? categories : [{ name: "", motions: motions.map((m) => m.name) }];
    // The cards scroll in a box of their own under the category buttons: the page stays short, Render
    // stays near, and a button brings its section to the top of the box (the address is not touched:
    // it holds the character's id).
    const nav = el("nav", { class: "categories", "aria-label": "Motion categories" });
    const scroller = el("div", { class: "motion-scroll", "data-testid": "picker-scroll", tabindex: "0",
      "aria-label": "Motions: tick the ones to render" });
    for (const group of groups) {
      const names = group.motions.filter((n) => byName.has(n));
      if (!names.length) continue;
      const title = CATEGORY_TITLES[group.name] || group.name.replaceAll("_", " ");
      const id = `category-${group.name || "all"}`;
      const ul = el("ul", { class: "motions" });
      for (const name of names) {
        const m = byName.get(name);
        const box = el("input", { type: "checkbox", "data-testid": `motion-${m.name}`, value: m.name, checked: checked.includes(m.name) });
        const img = el("img", { alt: `${m.title || m.name} preview`, width: PREVIEW_SIZE, height: PREVIEW_SIZE, loading: "lazy", decoding: "async" });
        const frame = el("span", { class: "preview", "data-state": m.preview ? "reference" : "empty" }, img);
        if (m.preview) img.src = m.preview; else img.hidden = true;
        img.addEventListener("error", () => { // a reference preview the server could not make: an empty card, no broken image
          const card = this.cards.get(m.name);
          if (card && !card.own) { img.hidden = true; frame.dataset.state = "empty"; }
        });
        const label = el("label", { class: "motion", title: m.origin ? `${m.origin} · ${m.licence}` : "" }, box, frame,
          el("span", { class: "name", text: m.title || m.name.replaceAll("_", " ") }),
          el("span", { class: "description", text: m.description || "" }));
        const li = el("li", { "data-motion": m.name }, label);
        ul.append(li);
        this.cards.set(m.name, { box, img, frame, reference: m.preview || null });
        this.observer.observe(li);
      }
      const section = el("section", { class: "category", id, "data-category": group.name },
        group.name ? el("h3", { text: title }) : "", ul);
      if (group.name) {
        const chip = el("button", { type: "button", class: "chip", "data-testid": `category-${group.name}`, "aria-controls": id, text: title });
        chip.addEventListener("click", () => {
          scroller.scrollTop += section.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
          for (const c of nav.children) c.setAttribute("aria-current", String(c === chip));
        });
        nav.append(chip);
      }
      scroller.append(section);
    }
    this.list.append(scroller);
    if (nav.children.length > 1) this.list.prepend(nav);
    this.list.dispatchEvent(new Event("change", { bubbles: true })); // the chosen motions are new
  }

  /** The title of motion `name` as its card shows it. */
  title(name) {
    return this.cards.get(name)?.box.closest("label").querySelector(".name").textContent || name.replaceAll("_", " ");
  }

  selected() {
    return [...this.cards].filter(([, c]) => c.box.checked).map(([name]) => name);
  }

  /**
   * Render small previews of `doc`: `first` first (it should play at once), then, one request at a
   * time, the motions whose cards are on screen (in page order; scrolling brings more): the pod's
   * other render processes stay free for the next Save's preview, and the 30-odd motions nobody
   * looks at cost nothing. Other cards show the reference character meanwhile. Resolves with
   * `{answered, playing}`: when the API answered `first`'s URL, and a promise of when its preview
   * began to play (performance.now() times; null if a newer call replaced it meanwhile); rejects
   * with the first request's error. A newer call (the character changed) stops the older one's
   * remaining requests and aborts the one in flight.
   */
  async preview(doc, first) {
    const generation = ++this.generation;
    this.inFlight?.abort();
    this.wake();
    const names = [...this.cards.keys()];
    const head = names.includes(first) ? first : names[0];
    this.shown = { generation, started: performance.now(), playing: [] };
    for (const [name, card] of this.cards) { // the older version's previews are stale: back to the reference
      if (card.own) {
        card.own = false;
        if (card.reference) card.img.src = card.reference;
        card.frame.dataset.state = card.reference ? "reference" : "empty";
      }
      if (name === head) card.frame.dataset.state = "loading";
    }
    const current = () => generation === this.generation;
    const key = (motion) => `${doc.id}@${doc.version}/${motion}`;
    // The preview's URL: from the cache, else asked for at background priority, waiting while a
    // render holds previews and waiting out 503s (the slot went to someone's render); a newer call
    // (or a hold) aborts the request in flight.
    const request = async (motion) => {
      const json = { motions: [motion], format: PREVIEW_FORMAT, size: PREVIEW_SIZE, max_frames: PREVIEW_FRAMES };
      while (current()) {
        if (this.cache.has(key(motion))) return { [motion]: this.cache.get(key(motion)) };
        while (current() && this.holds) await sleep(0.2);
        if (!current()) break;
        const controller = new AbortController();
        this.inFlight = controller;
        try {
          const answer = await call("POST", animationsPath(doc), {
            json, signal: controller.signal, headers: { Priority: BACKGROUND }, priority: "low",
          });
          const url = urlsOf(answer)[motion];
          if (url) this.cache.set(key(motion), url);
          return answer;
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          if (err.code === "aborted" && this.holds) continue; // a render began: ask again after it
          if (err.status === 503 && err.code === "overloaded") {
            await sleep(retrySeconds(err, 1));
            continue;
          }
          throw err;
        } finally {
          if (this.inFlight === controller) this.inFlight = null;
        }
      }
      throw new ApiError(0, "aborted", "the page no longer needs this answer");
    };
    const show = (name, answer) => {
      const card = this.cards.get(name);
      const url = urlsOf(answer)[name];
      if (!current() || !card || !url) return null; // a newer version's previews are coming
      card.own = true;
      card.img.hidden = false;
      card.img.loading = "eager";
      const playing = firstFrame(card.img);
      card.img.src = url;
      playing.then((t) => {
        card.frame.dataset.state = "playing";
        if (current()) this.shown.playing.push(t);
      }, () => { card.frame.dataset.state = "failed"; });
      return playing;
    };
    const answer = await request(head);
    const answered = performance.now();
    const playing = show(head, answer);
    (async () => {
      const done = new Set([head]);
      while (current()) {
        if (this.paused() || this.holds) {
          await sleep(0.2);
          continue;
        }
        const next = names.find((n) => !done.has(n) && this.onScreen.has(n));
        if (!next) { // nothing on screen left to do: wait for a scroll (or a newer call)
          await new Promise((resolve) => this.waiting.push(resolve));
          continue;
        }
        done.add(next);
        this.cards.get(next).frame.dataset.state = "loading";
        try {
          show(next, await request(next));
        } catch {
          if (current()) this.cards.get(next).frame.dataset.state = "failed";
        }
      }
    })();
    return { answered, playing: playing ?? Promise.resolve(null) };
  }
}

/** The rendered animations: each plays inline with a download link. */
export class Gallery {
  constructor(root) {
    this.root = root;
  }

  clear() {
    this.root.replaceChildren();
  }

  /**
   * Ask the API for `motions` of `doc` in `format` (at `size` px, or the server's default) and show
   * them; `onState` gets the render's progress (jobs.js).
   */
  async render(doc, motions, format, size, onState = () => {}, { sync = false, title = (n) => n.replaceAll("_", " "), onJob = null } = {}) {
    const body = { motions, format };
    if (size) body.size = size;
    const urls = urlsOf(await renderJob(animationsPath(doc), body, onState, { sync, onJob }));
    return this.show(motions, urls, format, size, title);
  }

  /** Show rendered animations (`urls` {motion: url}; e.g. kept from before a reload). */
  show(motions, urls, format, size, title = (n) => n.replaceAll("_", " ")) {
    this.clear();
    for (const name of motions) {
      const url = urls[name];
      if (!url) continue;
      const media = VIDEOS.has(format)
        ? el("video", { src: url, autoplay: true, loop: true, muted: true, playsinline: true, controls: true })
        : IMAGES.has(format)
          ? el("img", { src: url, alt: `${name} animation` })
          : el("p", { class: "download-note", "data-testid": `download-note-${name}`, text: DOWNLOADS[format] || format });
      if (media.tagName === "VIDEO") media.muted = true; // the attribute alone does not mute in every browser
      // a readable name ("dab-512px.gif"), not the character's 32-character id
      const file = `${name.replaceAll("_", "-")}${size ? `-${size}px` : ""}.${EXTENSIONS[format] || format}`;
      this.root.append(el("figure", { class: "animation", "data-testid": `animation-${name}` }, media,
        el("figcaption", {}, el("span", { text: title(name) }),
          el("a", { href: url, download: file, class: "button", text: "Download" }))));
    }
    return urls;
  }
}

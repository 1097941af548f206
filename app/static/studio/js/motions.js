// The motion picker (each motion with a small looping preview of the character) and the rendered
// animations with their download links.

import { call } from "./api.js";

export const PREVIEW_SIZE = 128; // px, the previews' side: small renders answer fast
// The whole clip in at most this many frames (max_frames): a choppier loop that renders in about half
// a full clip's time (the mesh setup is the rest).
export const PREVIEW_FRAMES = 40;
const PREVIEW_FORMAT = "gif"; // every browser loops a GIF in an <img>
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
function urlsOf(answer) {
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

export class MotionPicker {
  /** `paused()`: true while background previews should wait (the person is editing: a Save will
   * replace this version, so its previews would be wasted work on the server). */
  constructor(list, paused = () => false) {
    this.list = list;
    this.paused = paused;
    this.cards = new Map();
    this.generation = 0;
  }

  /** Build one card per motion; `checked` names start selected. */
  show(motions, checked) {
    this.list.replaceChildren();
    this.cards.clear();
    for (const m of motions) {
      const box = el("input", { type: "checkbox", "data-testid": `motion-${m.name}`, value: m.name, checked: checked.includes(m.name) });
      const img = el("img", { alt: `${m.name} preview`, width: PREVIEW_SIZE, height: PREVIEW_SIZE, hidden: true });
      const frame = el("span", { class: "preview", "data-state": "empty" }, img);
      const label = el("label", { class: "motion" }, box, frame,
        el("span", { class: "name", text: m.name.replaceAll("_", " ") }),
        el("span", { class: "description", text: m.description || "" }));
      this.list.append(el("li", {}, label));
      this.cards.set(m.name, { box, img, frame });
    }
  }

  selected() {
    return [...this.cards].filter(([, c]) => c.box.checked).map(([name]) => name);
  }

  /**
   * Render small previews of `doc` for every motion, `first` first (it should play at once), then
   * the others one request at a time: the pod's other render processes stay free for the next
   * Save's preview. Resolves with `{answered, playing}`: when the API answered `first`'s URL, and a
   * promise of when its preview began to play (performance.now() times; null if a newer call
   * replaced it meanwhile); rejects with the first request's error. A newer call (the character
   * changed) stops the older one's remaining requests and aborts the one in flight.
   */
  async preview(doc, first) {
    const generation = ++this.generation;
    this.inFlight?.abort();
    const names = [...this.cards.keys()];
    const order = names.includes(first) ? [first, ...names.filter((n) => n !== first)] : names;
    for (const name of order) this.cards.get(name).frame.dataset.state = "loading";
    const current = () => generation === this.generation;
    const request = (motion) => {
      this.inFlight = new AbortController();
      const json = { motions: [motion], format: PREVIEW_FORMAT, size: PREVIEW_SIZE, max_frames: PREVIEW_FRAMES };
      return call("POST", animationsPath(doc), { json, signal: this.inFlight.signal });
    };
    const show = (name, answer) => {
      const card = this.cards.get(name);
      const url = urlsOf(answer)[name];
      if (!current() || !card || !url) return null; // a newer version's previews are coming
      card.img.hidden = false;
      const playing = firstFrame(card.img);
      card.img.src = url;
      playing.then(() => { card.frame.dataset.state = "playing"; }, () => { card.frame.dataset.state = "failed"; });
      return playing;
    };
    const head = await request(order[0]);
    const answered = performance.now();
    const playing = show(order[0], head);
    (async () => {
      for (const name of order.slice(1)) {
        while (current() && this.paused()) await new Promise((resolve) => setTimeout(resolve, 200));
        if (!current()) return;
        try {
          show(name, await request(name));
        } catch {
          if (current()) this.cards.get(name).frame.dataset.state = "failed";
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

  /** Ask the API for `motions` of `doc` in `format` (at `size` px, or the server's default) and show them. */
  async render(doc, motions, format, size) {
    const body = { motions, format };
    if (size) body.size = size;
    const urls = urlsOf(await call("POST", animationsPath(doc), { json: body }));
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
      const file = `${doc.id}-${name}.${EXTENSIONS[format] || format}`;
      this.root.append(el("figure", { class: "animation", "data-testid": `animation-${name}` }, media,
        el("figcaption", {}, el("span", { text: name.replaceAll("_", " ") }),
          el("a", { href: url, download: file, class: "button", text: "Download" }))));
    }
    return urls;
  }
}

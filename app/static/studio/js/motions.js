// The motion picker (each motion with a small looping preview of the character, scheduled by
// previews.js) and the rendered animations with their download links.

import { renderJob } from "./jobs.js";
import { PREVIEW_SIZE, Previews, urlsOf } from "./previews.js";

export { PREVIEW_FRAMES, PREVIEW_SIZE } from "./previews.js";

const EXTENSIONS = { gif: "gif", webp: "webp", mp4: "mp4" };

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

export class MotionPicker {
  /** `paused()`: true while background previews should wait (the person is editing: a Save will
   * replace this version, so its previews would be wasted work on the server). */
  constructor(list, paused = () => false) {
    this.list = list;
    this.paused = paused;
    this.cards = new Map();
    this.previews = new Previews(this.cards, paused);
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
    this.previews.watch();
  }

  selected() {
    return [...this.cards].filter(([, c]) => c.box.checked).map(([name]) => name);
  }

  /**
   * Small previews of `doc`: `first` first (it should play at once), then the motions on screen
   * (see previews.js). Resolves with `{answered, playing}` for `first`.
   */
  preview(doc, first) {
    return this.previews.show(doc, first);
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
  async render(doc, motions, format, size, onState = () => {}) {
    const body = { motions, format };
    if (size) body.size = size;
    const urls = urlsOf(await renderJob(animationsPath(doc), body, onState));
    this.clear();
    for (const name of motions) {
      const url = urls[name];
      if (!url) continue;
      const media = format === "mp4"
        ? el("video", { src: url, autoplay: true, loop: true, muted: true, playsinline: true, controls: true })
        : el("img", { src: url, alt: `${name} animation` });
      if (media.tagName === "VIDEO") media.muted = true; // the attribute alone does not mute in every browser
      const file = `${doc.id}-${name}.${EXTENSIONS[format] || format}`;
      this.root.append(el("figure", { class: "animation", "data-testid": `animation-${name}` }, media,
        el("figcaption", {}, el("span", { text: name.replaceAll("_", " ") }),
          el("a", { href: url, download: file, class: "button", text: "Download" }))));
    }
    return urls;
  }
}

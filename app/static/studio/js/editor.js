// The editing stage: the photo with the box, the tinted mask and the skeleton, all editable with a
// mouse, a pen or a finger (pointer events) and the keyboard.
//
// Layers, bottom to top: a canvas with the photo, a canvas with the mask tint, an SVG with the box,
// bones and joints. All three show the same "view", a rectangle of the photo in image pixels.
// The mask itself lives in `maskCanvas`, one pixel per grid pixel (see character.js): alpha 255 on
// the character, 0 elsewhere; brush strokes draw into it, the eraser clears it.
//
// A draft (a photo the server has not seen yet: `doc.draft`, no mask) may have no box: a press
// anywhere outside the box draws a new one (in any document), and every box and joint of a draft
// counts as an unsaved edit until it is saved (created).

import { bones, copyJoints, imageSize, imageToGrid, sameBox, sameJoints } from "./character.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const HANDLE_CSS = 8; // drawn radius of a joint or box corner, screen pixels
const GRAB_CSS = 24; // a press this close to a handle grabs it (a fingertip)
const MIN_BOX = 8; // smallest box side, image pixels
const UNDO_LIMIT = 40;
const TINT = [236, 72, 153]; // the mask's colour
const TINT_ALPHA = 0.45;
const KEY_STEP = { normal: 1, shift: 10 }; // arrow-key moves, image pixels

export class Editor extends EventTarget {
  constructor(stage) {
    super();
    this.stage = stage;
    this.photoCanvas = stage.querySelector("canvas.photo");
    this.tintCanvas = stage.querySelector("canvas.tint");
    this.svg = stage.querySelector("svg");
    this.maskCanvas = document.createElement("canvas");
    this.tool = "move";
    this.brushCss = 16;
    this.showMask = true;
    this.wholePhoto = false;
    this.undoStack = [];
    this.gesture = null;
    this.selected = null;
    this.doc = null;
    stage.addEventListener("pointerdown", (e) => this.onDown(e));
    stage.addEventListener("pointermove", (e) => this.onMove(e));
    stage.addEventListener("pointerup", (e) => this.onUp(e));
    stage.addEventListener("pointercancel", (e) => this.onUp(e, true));
    stage.addEventListener("pointerleave", () => this.hideCursor());
    stage.addEventListener("keydown", (e) => this.onKey(e));
    // A finger that starts on nothing to drag (the paper beside the box) scrolls the page; one that
    // starts on a joint, a corner, the box, or paints, is the editor's (the stage's touch-action lets
    // the page pan; cancelling the touch's start keeps it from panning).
    stage.addEventListener("touchstart", (e) => {
      if (e.touches.length === 1 && this.wouldDrag(e.touches[0])) e.preventDefault();
    }, { passive: false });
    new ResizeObserver(() => this.layout()).observe(stage.parentElement);
    window.addEventListener("resize", () => this.layout());
  }

  // --- loading -------------------------------------------------------------------------------

  /**
   * Show `doc` on `photo` (an ImageBitmap of the photo at any resolution: it is stretched over the
   * image's size in image pixels) with `mask` (an ImageBitmap in the grid, or null: not editable).
   */
  load(doc, photo, mask, grid) {
    this.doc = doc;
    this.photo = photo;
    this.size = imageSize(doc);
    this.grid = grid;
    this.bbox = doc.bbox ? [...doc.bbox] : null;
    this.joints = copyJoints(doc.joints);
    this.bones = bones(doc);
    this.undoStack = [];
    this.maskStrokes = 0;
    this.maskEditable = Boolean(mask && grid);
    if (this.maskEditable) this.readMask(mask);
    if (!this.joints[this.selected]) this.selected = null;
    this.view = this.fitView();
    this.buildSvg();
    this.layout();
    this.changed();
  }

  readMask(mask) {
    const { width, height } = this.grid;
    this.maskCanvas.width = width;
    this.maskCanvas.height = height;
    const ctx = this.maskCanvas.getContext("2d", { willReadFrequently: true });
    ctx.clearRect(0, 0, width, height);
    ctx.drawImage(mask, 0, 0, width, height);
    const data = ctx.getImageData(0, 0, width, height);
    const px = data.data;
    for (let i = 0; i < px.length; i += 4) {
      const on = px[i] + px[i + 1] + px[i + 2] >= 3 * 128 && px[i + 3] >= 128;
      px[i] = TINT[0];
      px[i + 1] = TINT[1];
      px[i + 2] = TINT[2];
      px[i + 3] = on ? 255 : 0;
    }
    ctx.putImageData(data, 0, 0);
  }

  /** The rectangle shown: the box and the joints with a margin, or the whole photo. */
  fitView() {
    const W = this.size.width;
    const H = this.size.height;
    if (this.wholePhoto || !this.bbox) return { x: 0, y: 0, w: W, h: H };
    let [l, t, r, b] = this.bbox;
    for (const [x, y] of Object.values(this.joints)) {
      l = Math.min(l, x);
      t = Math.min(t, y);
      r = Math.max(r, x);
      b = Math.max(b, y);
    }
    // A margin around them (past the photo's edge if need be, so edge handles stay grabbable),
    // but never much more than the photo itself.
    const pad = 0.12 * Math.max(r - l, b - t) + 10;
    l = Math.max(-pad, l - pad);
    t = Math.max(-pad, t - pad);
    r = Math.min(W + pad, r + pad);
    b = Math.min(H + pad, b + pad);
    return { x: l, y: t, w: Math.max(1, r - l), h: Math.max(1, b - t) };
  }

  setWholePhoto(on) {
    this.wholePhoto = on;
    if (!this.doc) return;
    this.view = this.fitView();
    this.layout();
  }

  // --- layout and drawing -----------------------------------------------------------------------

  /** Size the stage to its column (and the screen's height), then redraw. */
  layout() {
    const column = this.stage.parentElement.clientWidth;
    if (!this.doc || column === 0) return; // hidden: the ResizeObserver calls again when shown
    const maxHeight = Math.max(240, window.innerHeight * 0.72);
    const aspect = this.view.w / this.view.h;
    const width = Math.min(column, maxHeight * aspect);
    const height = width / aspect;
    this.stage.style.width = `${width}px`;
    this.stage.style.height = `${height}px`;
    this.cssScale = width / this.view.w; // screen px per image px
    const dpr = window.devicePixelRatio || 1;
    for (const canvas of [this.photoCanvas, this.tintCanvas]) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
    }
    this.svg.setAttribute("viewBox", `${this.view.x} ${this.view.y} ${this.view.w} ${this.view.h}`);
    this.drawPhoto();
    this.drawTint();
    this.drawSvg();
  }

  drawPhoto() {
    const ctx = this.photoCanvas.getContext("2d");
    const { x, y, w, h } = this.view;
    const c = this.photoCanvas.width / w; // canvas px per image px
    ctx.clearRect(0, 0, this.photoCanvas.width, this.photoCanvas.height);
    // The photo (any resolution) stretched over the image's size, placed in the view.
    ctx.drawImage(this.photo, -x * c, -y * c, this.size.width * c, this.size.height * c);
  }

  drawTint() {
    const ctx = this.tintCanvas.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.tintCanvas.width, this.tintCanvas.height);
    if (!this.showMask || !this.maskEditable) return;
    const k = this.tintCanvas.width / this.view.w; // canvas px per image px
    const g = this.grid;
    ctx.globalAlpha = TINT_ALPHA;
    ctx.imageSmoothingEnabled = false;
    ctx.setTransform(k * g.perPixel, 0, 0, k * g.perPixel, k * (g.offsetX - this.view.x), k * (g.offsetY - this.view.y));
    ctx.drawImage(this.maskCanvas, 0, 0);
  }

  buildSvg() {
    const svg = this.svg;
    svg.replaceChildren();
    const make = (tag, attrs, parent = svg) => {
      const el = document.createElementNS(SVG_NS, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
      parent.appendChild(el);
      return el;
    };
    this.boxEl = make("rect", { class: "box", "data-testid": "box" });
    this.cornerEls = ["tl", "tr", "bl", "br"].map((c) => make("rect", { class: "corner", "data-corner": c, "data-testid": `box-${c}` }));
    this.boneEls = this.bones.filter((b) => b.parent && this.joints[b.parent]).map((b) => ({ bone: b, el: make("line", { class: "bone" }) }));
    this.jointEls = {};
    this.labelEls = {};
    for (const name of Object.keys(this.joints)) {
      const side = sideOf(name);
      const el = make("circle", { class: `joint${side ? ` ${side}` : ""}`, "data-joint": name, "data-testid": `joint-${name}` });
      make("title", {}, el).textContent = name.replaceAll("_", " ");
      this.jointEls[name] = el;
    }
    // every joint named beside it (the figure's own left and right told apart), above the bones
    for (const name of Object.keys(this.joints)) {
      const label = make("text", { class: `joint-label${sideOf(name) ? ` ${sideOf(name)}` : ""}`, "data-testid": `label-${name}` });
      label.textContent = jointLabel(name);
      this.labelEls[name] = label;
    }
    this.cursorEl = make("circle", { class: "brush-cursor", visibility: "hidden" });
  }

  drawSvg() {
    const s = 1 / this.cssScale; // image px per screen px
    const [l, t, r, b] = this.bbox || [0, 0, 0, 0];
    const boxShown = this.bbox ? "visible" : "hidden";
    this.boxEl.setAttribute("visibility", boxShown);
    for (const el of this.cornerEls) el.setAttribute("visibility", boxShown);
    setAttrs(this.boxEl, { x: l, y: t, width: r - l, height: b - t, "stroke-width": 2 * s, "stroke-dasharray": `${6 * s} ${4 * s}` });
    const half = HANDLE_CSS * s;
    const corners = { tl: [l, t], tr: [r, t], bl: [l, b], br: [r, b] };
    for (const el of this.cornerEls) {
      const [x, y] = corners[el.dataset.corner];
      setAttrs(el, { x: x - half, y: y - half, width: 2 * half, height: 2 * half, "stroke-width": 1.5 * s });
    }
    for (const { bone, el } of this.boneEls) {
      const [x1, y1] = this.joints[bone.parent];
      const [x2, y2] = this.joints[bone.name];
      setAttrs(el, { x1, y1, x2, y2, "stroke-width": 3 * s });
    }
    for (const [name, el] of Object.entries(this.jointEls)) {
      const [x, y] = this.joints[name];
      setAttrs(el, { cx: x, cy: y, r: HANDLE_CSS * s, "stroke-width": 2 * s });
      el.classList.toggle("selected", name === this.selected);
    }
    this.placeLabels(s);
    const boxLocked = this.maskStrokes > 0;
    this.svg.classList.toggle("box-locked", boxLocked);
    this.svg.classList.toggle("painting", this.tool !== "move");
  }

  /**
   * Each joint's label beside it where it covers no other label and no joint (a phone's small stage
   * crowds them): the joint's own place first (labelPlace), then the other sides, then further out;
   * where none is free, the place that overlaps least. Screen pixels, `s` image px per screen px.
   */
  placeLabels(s) {
    const r = HANDLE_CSS;
    const pos = (name) => [(this.joints[name][0] - this.view.x) / s, (this.joints[name][1] - this.view.y) / s];
    const taken = Object.keys(this.joints).map((name) => {
      const [x, y] = pos(name);
      return [x - r, y - r, x + r, y + r];
    });
    const overlap = (a) => taken.reduce((sum, b) =>
      sum + Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0])) * Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1])), 0);
    for (const name of Object.keys(this.joints)) {
      const label = this.labelEls[name];
      const width = this.labelWidth(label);
      const [x, y] = pos(name);
      const own = taken.filter((b) => Math.abs((b[0] + b[2]) / 2 - x) < 0.01 && Math.abs((b[1] + b[3]) / 2 - y) < 0.01);
      let best = null;
      for (const [dx, dy, anchor] of labelPlaces(name)) {
        const left = x + dx * r - (anchor === "end" ? width : anchor === "middle" ? width / 2 : 0);
        const base = y + dy * r + 4;
        const rect = [left - 1, base - 10, left + width + 1, base + 3];
        // the label's own joint does not count against it
        const cost = overlap(rect) - own.reduce((sum, b) =>
          sum + Math.max(0, Math.min(rect[2], b[2]) - Math.max(rect[0], b[0])) * Math.max(0, Math.min(rect[3], b[3]) - Math.max(rect[1], b[1])), 0);
        if (!best || cost < best.cost - 0.5) best = { cost, rect, dx, dy, anchor };
        if (cost <= 0.5) break;
      }
      taken.push(best.rect);
      setAttrs(label, { x: this.joints[name][0] + best.dx * r * s, y: this.joints[name][1] + (best.dy * r + 4) * s,
        "text-anchor": best.anchor, "font-size": 12 * s, "stroke-width": 3 * s });
    }
  }

  /** A label's width in screen pixels at 12 px (measured once; estimated while the stage is hidden). */
  labelWidth(label) {
    this.labelWidths = this.labelWidths || {};
    const text = label.textContent;
    if (!this.labelWidths[text]) {
      label.setAttribute("font-size", 12 / this.cssScale);
      const measured = label.getComputedTextLength() * this.cssScale;
      if (measured > 0) this.labelWidths[text] = measured;
      else return text.length * 7;
    }
    return this.labelWidths[text];
  }

  // --- pointer input ----------------------------------------------------------------------------

  /** Screen point of `e` -> image pixels. */
  toImage(e) {
    const rect = this.stage.getBoundingClientRect();
    return [this.view.x + (e.clientX - rect.left) / this.cssScale, this.view.y + (e.clientY - rect.top) / this.cssScale];
  }

  onDown(e) {
    if (!this.doc || this.gesture || (e.pointerType === "mouse" && e.button !== 0)) return;
    const [x, y] = this.toImage(e);
    const gesture = this.tool === "move" ? this.grab(x, y) : this.startStroke(x, y);
    if (!gesture) return;
    e.preventDefault();
    this.stage.focus({ preventScroll: true });
    this.stage.setPointerCapture(e.pointerId);
    this.gesture = { ...gesture, pointerId: e.pointerId, moved: false };
  }

  /** Whether a press at screen point `p` ({clientX, clientY}) starts a drag of the editor's. */
  wouldDrag(p) {
    if (!this.doc) return false;
    if (this.tool !== "move" || !this.bbox) return true; // painting, or drawing the first box
    const [x, y] = this.toImage(p);
    const reach = GRAB_CSS / this.cssScale;
    if (Object.values(this.joints).some(([jx, jy]) => Math.hypot(jx - x, jy - y) < reach)) return true;
    // the box's edge and corners (its inside is most of the stage: a swipe there scrolls)
    return this.insideBox(x, y, reach) && !this.insideBox(x, y, -reach);
  }

  /** What a press at (x, y) grabs in move mode: a joint, a box corner, the box, or nothing. */
  grab(x, y) {
    const reach = GRAB_CSS / this.cssScale;
    let best = null;
    let bestDist = reach;
    for (const [name, [jx, jy]] of Object.entries(this.joints)) {
      const d = Math.hypot(jx - x, jy - y);
      if (d < bestDist) [best, bestDist] = [name, d];
    }
    if (best) {
      this.selected = best;
      const [jx, jy] = this.joints[best];
      this.snapshot();
      this.dispatchEvent(new CustomEvent("select", { detail: best }));
      return { kind: "joint", name: best, dx: jx - x, dy: jy - y };
    }
    if (this.maskStrokes > 0) {
      if (this.insideBox(x, y, reach)) this.hint("Save or undo the mask strokes before changing the box: a new box recomputes the mask.");
      return null;
    }
    if (!this.bbox || !this.insideBox(x, y, reach)) { // a press off the box draws a new one
      this.snapshot();
      return { kind: "newbox", x0: clamp(x, 0, this.size.width), y0: clamp(y, 0, this.size.height), box0: this.bbox };
    }
    const [l, t, r, b] = this.bbox;
    const corners = { tl: [l, t], tr: [r, t], bl: [l, b], br: [r, b] };
    for (const [corner, [cx, cy]] of Object.entries(corners)) {
      if (Math.hypot(cx - x, cy - y) < reach) {
        this.snapshot();
        return { kind: "corner", corner, dx: cx - x, dy: cy - y };
      }
    }
    if (this.insideBox(x, y, 0)) {
      this.snapshot();
      return { kind: "box", x0: x, y0: y, box0: [...this.bbox] };
    }
    return null;
  }

  insideBox(x, y, margin) {
    if (!this.bbox) return false;
    const [l, t, r, b] = this.bbox;
    return x >= l - margin && x <= r + margin && y >= t - margin && y <= b + margin;
  }

  onMove(e) {
    if (this.tool !== "move" && this.doc) this.showCursor(e);
    const g = this.gesture;
    if (!g || g.pointerId !== e.pointerId) return;
    e.preventDefault();
    // Coalesced events keep a fast finger's stroke continuous.
    const events = g.kind === "stroke" && e.getCoalescedEvents ? e.getCoalescedEvents() : [e];
    for (const ev of events.length ? events : [e]) {
      const [x, y] = this.toImage(ev);
      g.moved = true;
      if (g.kind === "joint") this.moveJoint(g.name, x + g.dx, y + g.dy);
      else if (g.kind === "corner") this.moveCorner(g.corner, x + g.dx, y + g.dy);
      else if (g.kind === "box") this.moveBox(g.box0, x - g.x0, y - g.y0);
      else if (g.kind === "newbox") this.drawBox(g.x0, g.y0, x, y);
      else if (g.kind === "stroke") this.strokeTo(x, y);
    }
    if (g.kind === "stroke") this.drawTint();
    else this.drawSvg();
  }

  onUp(e, cancelled = false) {
    const g = this.gesture;
    if (!g || g.pointerId !== e.pointerId) return;
    this.gesture = null;
    if (this.stage.hasPointerCapture(e.pointerId)) this.stage.releasePointerCapture(e.pointerId);
    if (cancelled) { // the browser took the pointer (a scroll, a system gesture): drop this edit
      if (g.kind === "stroke") this.maskStrokes += 1; // undo() takes it back
      this.undo();
      return;
    }
    if (g.kind === "stroke") {
      this.maskStrokes += 1;
    } else if (g.kind === "newbox" && (!this.bbox || !g.moved || this.bbox === g.box0 ||
        this.bbox[2] - this.bbox[0] < MIN_BOX || this.bbox[3] - this.bbox[1] < MIN_BOX)) {
      this.bbox = g.box0; // a tap, or a box too small to hold a drawing: nothing drawn
      this.undoStack.pop();
      if (!this.bbox) this.hint("Press beside the drawing and drag across it to put a box around it.");
    } else if (!g.moved) {
      this.undoStack.pop(); // a tap that moved nothing is not an edit
    } else if (g.kind === "newbox") {
      this.dispatchEvent(new CustomEvent("newbox", { detail: [...this.bbox] }));
    }
    this.drawSvg();
    this.changed();
  }

  /** The box spanned by a drag from (x0, y0) to (x, y), inside the photo. */
  drawBox(x0, y0, x, y) {
    x = clamp(x, 0, this.size.width);
    y = clamp(y, 0, this.size.height);
    this.bbox = [Math.min(x0, x), Math.min(y0, y), Math.max(x0, x), Math.max(y0, y)];
  }

  /** Replace the skeleton: `joints` {name: [x, y]} (image pixels), `skeleton` [{name, parent}]. */
  placeJoints(joints, skeleton) {
    this.joints = copyJoints(joints);
    this.bones = bones({ skeleton, joints });
    if (!this.joints[this.selected]) this.selected = null;
    this.buildSvg();
    this.drawSvg();
    this.changed();
  }


  /** Put the box at `bbox` (e.g. another detection) as an edit, if no mask strokes are unsaved. */
  setBox(bbox) {
    if (!this.doc) return;
    if (this.maskStrokes > 0) {
      this.hint("Save or undo the mask strokes before changing the box: a new box recomputes the mask.");
      return;
    }
    this.snapshot();
    this.bbox = [...bbox];
    this.view = this.fitView();
    this.layout();
    this.changed();
  }

  moveJoint(name, x, y) {
    this.joints[name] = [clamp(x, 0, this.size.width), clamp(y, 0, this.size.height)];
  }

  moveCorner(corner, x, y) {
    const W = this.size.width;
    const H = this.size.height;
    let [l, t, r, b] = this.bbox;
    if (corner[1] === "l") l = clamp(x, 0, r - MIN_BOX);
    else r = clamp(x, l + MIN_BOX, W);
    if (corner[0] === "t") t = clamp(y, 0, b - MIN_BOX);
    else b = clamp(y, t + MIN_BOX, H);
    this.bbox = [l, t, r, b];
  }

  moveBox([l, t, r, b], dx, dy) {
    dx = clamp(dx, -l, this.size.width - r);
    dy = clamp(dy, -t, this.size.height - b);
    this.bbox = [l + dx, t + dy, r + dx, b + dy];
  }

  // --- mask painting ----------------------------------------------------------------------------

  startStroke(x, y) {
    if (this.doc.draft) {
      this.hint("Save first: the server cuts the drawing out of the box, then its mask can be painted.");
      return null;
    }
    if (!this.maskEditable) {
      this.hint("The mask cannot be painted here (its image could not be read).");
      return null;
    }
    if (!sameBox(this.bbox, this.doc.bbox)) {
      this.hint("Save the new box first: it recomputes the mask, then paint.");
      return null;
    }
    this.snapshot(true);
    const [u, v] = imageToGrid(this.grid, x, y);
    const gesture = { kind: "stroke", u, v };
    this.gesture = gesture; // strokeTo reads the last point from it
    this.paint(u, v, u, v);
    this.drawTint();
    return gesture;
  }

  strokeTo(x, y) {
    const [u, v] = imageToGrid(this.grid, x, y);
    this.paint(this.gesture.u, this.gesture.v, u, v);
    this.gesture.u = u;
    this.gesture.v = v;
  }

  /** A round-capped segment of the brush's width from (u0, v0) to (u1, v1), grid pixels. */
  paint(u0, v0, u1, v1) {
    const ctx = this.maskCanvas.getContext("2d", { willReadFrequently: true });
    ctx.save();
    ctx.globalCompositeOperation = this.tool === "eraser" ? "destination-out" : "source-over";
    ctx.strokeStyle = `rgb(${TINT.join(",")})`;
    ctx.lineCap = "round";
    ctx.lineJoin = "round";
    ctx.lineWidth = (2 * this.brushCss) / (this.cssScale * this.grid.perPixel);
    ctx.beginPath();
    ctx.moveTo(u0, v0);
    ctx.lineTo(u1 + 0.01, v1);
    ctx.stroke();
    ctx.restore();
  }

  showCursor(e) {
    const [x, y] = this.toImage(e);
    setAttrs(this.cursorEl, { cx: x, cy: y, r: this.brushCss / this.cssScale, visibility: "visible", "stroke-width": 1.5 / this.cssScale });
  }

  hideCursor() {
    this.cursorEl?.setAttribute("visibility", "hidden");
  }

  /** The mask as a PNG Blob in the grid: white on the character, black elsewhere. */
  maskPng() {
    const { width, height } = this.grid;
    const src = this.maskCanvas.getContext("2d", { willReadFrequently: true }).getImageData(0, 0, width, height).data;
    const out = document.createElement("canvas");
    out.width = width;
    out.height = height;
    const ctx = out.getContext("2d");
    const data = ctx.createImageData(width, height);
    for (let i = 0; i < src.length; i += 4) {
      const v = src[i + 3] >= 128 ? 255 : 0;
      data.data[i] = v;
      data.data[i + 1] = v;
      data.data[i + 2] = v;
      data.data[i + 3] = 255;
    }
    ctx.putImageData(data, 0, 0);
    return new Promise((resolve) => out.toBlob(resolve, "image/png"));
  }

  // --- keyboard ---------------------------------------------------------------------------------

  onKey(e) {
    if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "z") {
      e.preventDefault();
      this.undo();
      return;
    }
    const names = Object.keys(this.joints);
    if ((e.key === "n" || e.key === "p") && names.length) { // next / previous joint
      const i = names.indexOf(this.selected) + (e.key === "n" ? 1 : -1);
      this.select(names[(i + names.length) % names.length]);
      return;
    }
    const dirs = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    if (!dirs[e.key] || !this.selected) return;
    e.preventDefault();
    const step = e.shiftKey ? KEY_STEP.shift : KEY_STEP.normal;
    const [x, y] = this.joints[this.selected];
    this.snapshot();
    this.moveJoint(this.selected, x + dirs[e.key][0] * step, y + dirs[e.key][1] * step);
    this.drawSvg();
    this.changed();
  }

  select(name) {
    this.selected = name;
    this.drawSvg();
    this.dispatchEvent(new CustomEvent("select", { detail: name }));
  }

  // --- tools, undo, state -------------------------------------------------------------------------

  setTool(tool) {
    this.tool = tool;
    this.hideCursor();
    if (this.doc) this.drawSvg();
  }

  setBrush(css) {
    this.brushCss = css;
  }

  setShowMask(on) {
    this.showMask = on;
    if (this.doc) this.drawTint();
  }

  snapshot(withMask = false) {
    const entry = { bbox: this.bbox && [...this.bbox], joints: copyJoints(this.joints), bones: this.bones };
    if (withMask) entry.mask = this.maskCanvas.getContext("2d", { willReadFrequently: true }).getImageData(0, 0, this.grid.width, this.grid.height);
    this.undoStack.push(entry);
    if (this.undoStack.length > UNDO_LIMIT) this.undoStack.shift();
  }

  undo() {
    const entry = this.undoStack.pop();
    if (!entry) return;
    this.bbox = entry.bbox;
    this.joints = entry.joints;
    if (entry.bones !== this.bones) {
      this.bones = entry.bones;
      this.buildSvg();
    }
    if (entry.mask) {
      this.maskCanvas.getContext("2d").putImageData(entry.mask, 0, 0);
      this.maskStrokes = Math.max(0, this.maskStrokes - 1);
    }
    this.drawTint();
    this.drawSvg();
    this.changed();
  }

  /** Throw away every unsaved edit. */
  revert(mask) {
    if (!this.doc) return;
    this.load(this.doc, this.photo, mask, this.grid);
  }

  /** The unsaved edits: {bbox?, joints?, mask?: true}. */
  edits() {
    if (!this.doc) return {};
    const out = {};
    if (this.doc.draft) { // nothing is on the server yet: the box and joints are the whole edit
      if (!this.bbox) return {};
      out.bbox = this.bbox.map(round1);
      out.joints = Object.fromEntries(Object.entries(this.joints).map(([k, [x, y]]) => [k, [round1(x), round1(y)]]));
      return out;
    }
    if (!sameBox(this.bbox, this.doc.bbox)) out.bbox = this.bbox.map(round1);
    if (!sameJoints(this.joints, this.doc.joints)) {
      out.joints = Object.fromEntries(Object.entries(this.joints).map(([k, [x, y]]) => [k, [round1(x), round1(y)]]));
    }
    if (this.maskStrokes > 0) out.mask = true;
    return out;
  }

  canUndo() {
    return this.undoStack.length > 0;
  }

  changed() {
    this.dispatchEvent(new CustomEvent("change", { detail: this.edits() }));
  }

  hint(text) {
    this.dispatchEvent(new CustomEvent("hint", { detail: text }));
  }

  /** Where joint `name` is on screen (tests and the selection label). */
  jointOnScreen(name) {
    const rect = this.stage.getBoundingClientRect();
    const [x, y] = this.joints[name];
    return [rect.left + (x - this.view.x) * this.cssScale, rect.top + (y - this.view.y) * this.cssScale];
  }
}

/** "left" / "right" (the figure's own side) or "" for a joint name. */
function sideOf(name) {
  return name.startsWith("left_") ? "left" : name.startsWith("right_") ? "right" : "";
}

/** A joint's label on the stage: "L hand", "R knee", "neck". */
function jointLabel(name) {
  const side = sideOf(name);
  const part = side ? name.slice(side.length + 1) : name;
  return `${side ? `${side[0].toUpperCase()} ` : ""}${part.replaceAll("_", " ")}`;
}

/** Where a joint's label goes, in handle radii from the joint: [dx, dy, text-anchor]. The figure's right
 * is on the image's left, so its labels go outward on the left; shoulders above and elbows below, so a
 * standing figure's arm row stays readable in a narrow box. */
function labelPlace(name) {
  const side = sideOf(name);
  const out = side === "right" ? -1 : 1;
  const anchor = side === "right" ? "end" : "start";
  if (name.endsWith("shoulder")) return [0.6 * out, -1.9, anchor];
  if (name.endsWith("elbow")) return [0.6 * out, 2.1, anchor];
  if (name === "torso" || name === "hip") return [0, -1.9, "middle"];
  if (name === "root") return [0, 2.4, "middle"];
  return [1.4 * out, 0, anchor];
}

/** The places tried for a joint's label, best first (see Editor.placeLabels): its own, then outward,
 * inward, above and below, then the same twice as far. */
function labelPlaces(name) {
  const side = sideOf(name);
  const out = side === "right" ? -1 : 1;
  const [outward, inward] = side === "right" ? ["end", "start"] : ["start", "end"];
  const near = [labelPlace(name), [1.4 * out, 0, outward], [-1.4 * out, 0, inward], [0, -1.9, "middle"],
    [0, 2.4, "middle"], [1.1 * out, -1.7, outward], [1.1 * out, 2.0, outward], [-1.1 * out, -1.7, inward],
    [-1.1 * out, 2.0, inward]];
  return [...near, ...near.slice(1).map(([dx, dy, a]) => [dx * 2, dy * 1.8, a])];
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
}

function clamp(v, lo, hi) {
  return Math.min(hi, Math.max(lo, v));
}

function round1(v) {
  return Math.round(v * 10) / 10;
}


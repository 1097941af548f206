// Every character of one photo, together: the scene view (POST /scenes, PATCH /scenes/{id},
// POST /scenes/{id}/animations). The page shows the photo with each character's box numbered; a box
// is dragged (mouse, pen or finger, kept on the page) or moved with the arrow keys to move its
// character; per character a motion, "Back where drawn", "Fix" (the studio's character editor) and
// "Drop". "Add one the detector missed" draws a box, then the joints are placed in the studio's own
// editor (a standing figure scaled to the box to start from) and the server cuts the character out
// of the scene's stored page (so it works after a reload too). The background is the paper (every
// drawing taken out where it was drawn), a colour, a picture or nothing; "Play the scene" renders a
// preview shown above the photo, "Download" any format the API renders at a chosen size. The last
// results of each scene version are kept in this browser (localStorage), so a reload shows them again,
// and so is a render in progress (its job), which a reloaded page follows to its end.

import { ApiError, call, describe, fetchBitmap, getToken, keptUntil, modelsState, request, sameOrigin, sheetTooBig,
  upload } from "./api.js";
import { Editor } from "./editor.js";
import { renderJob, resumeJob, waitingOut, waitWords } from "./jobs.js";
import { SKELETON, skeletonIn } from "./manual.js";

const SVG = "http://www.w3.org/2000/svg";
const RESULTS_KEY = "doodlepod.scene-results."; // + scene id: {version, preview, download, pending}
const KEY_STEP = { normal: 4, shift: 24 }; // arrow keys, image pixels
const KEY_SAVE_MS = 600; // arrow-key moves are saved this long after the last key
const DRAG_SLOP_PX = 3; // a press that moves less is a tap (selects, moves nothing)
const FORMATS = [
  ["gif", "GIF", "gif"], ["webp", "WebP", "webp"], ["apng", "APNG (animated PNG)", "png"], ["mp4", "MP4 video", "mp4"],
  ["webm", "WebM video (transparent)", "webm"], ["sheet", "Sprite sheet + atlas (zip)", "sheet.zip"],
  ["frames", "PNG frames (zip)", "frames.zip"], ["joints", "Joint positions (JSON)", "joints.json"],
];
const SIZES = [["", "server's default"], ["256", "256 px"], ["512", "512 px"], ["768", "768 px"], ["1024", "1024 px"]];
const IMAGES = new Set(["gif", "webp", "apng"]);
// Answers after which the server could not fit a skeleton in a box: the joints are placed by hand.
const FIT_MISSED = new Set(["no_character", "no_skeleton", "invalid_character", "models_unavailable",
  "model_server_unavailable", "model_server_error"]);
const VIDEOS = new Set(["mp4", "webm"]);
const TINY = "This server runs tiny random-initialised models, built for testing and never trained: what they " +
  "find is meaningless. Add each drawing they missed with “Add one the detector missed” (its box, then its " +
  "joints), and drop any box that is not a drawing.";
// No trained models on this server: the ink finder found the boxes and joints (on the model server, or in
// the app while that is not ready). It reads the ink, so drawings that touch or overlap come as one box.
const FOUND_BY = new Set(["found_by_ink_finder", "found_by_ink_finder_in_app"]);
const FINDER = "This server has no trained models: the ink finder found these drawings by reading the ink. Check " +
  "each box: drop one that holds several drawings (drawings that touch come as one) or none, and add each " +
  "drawing it missed with “Add one the detector missed” (its box, then its joints: fitted where the finder can, " +
  "for you to check).";
const MODELS_WORDS = {
  preparing: "The models that find drawings are still being installed on this server.",
  starting: "The model server is starting and loading its models.",
  absent: "This server has no model server answering, so the page cannot find the drawings for you.",
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "testid") node.dataset.testid = v;
    else if (k === "text") node.textContent = v;
    else if (k in node && k !== "list") node[k] = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

const round1 = (v) => Math.round(v * 10) / 10;
const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

function storedResults(id) {
  try {
    return JSON.parse(localStorage.getItem(RESULTS_KEY + id) || "null");
  } catch {
    return null;
  }
}

function storeResults(id, value) {
  try {
    localStorage.setItem(RESULTS_KEY + id, JSON.stringify(value));
  } catch {
    // private mode or full: the results just do not survive a reload
  }
}

/**
 * Build the scene view inside `section` (an empty, hidden <section>). `onFix(characterId)` opens a
 * character in the studio's editor. Returns {offer(file), open(sceneDoc), create(), refresh(), fail(err)}.
 */
export function mountScene(section, { onFix = null, onOpen = null, onPhoto = null } = {}) {
  const state = {
    file: null, scene: null, page: null, motions: [], drawing: null, busy: false, selected: null, drag: null,
    keyTimer: null, photo: null, editor: null, tiny: false, finder: false,
  };
  const h2 = el("h2", { id: "h-scene" }, el("span", { className: "step", text: "★" }), " Every character together");
  const hint = el("p", { className: "hint", text: "Several figures on the page? Animate them all where they were drawn." });
  const create = el("button", { type: "button", className: "primary", testid: "scene-create",
    text: "Animate every character in this photo" });
  const modelsNote = el("div", { className: "notice", role: "status", testid: "scene-models-note", hidden: true }, el("p"));
  const status = el("p", { className: "hint", role: "status", "aria-live": "polite", testid: "scene-status" });
  const expiry = el("p", { className: "hint", testid: "scene-expiry" });
  const error = el("div", { role: "alert", className: "scene-error", testid: "scene-error", hidden: true });

  // the result, above the photo: where a phone shows it without scrolling past the editor
  const resultMedia = el("div", { className: "scene-result-media" });
  const resultLink = el("a", { className: "button", testid: "scene-download-link", hidden: true, text: "Download" });
  const resultCaption = el("p", { className: "hint", testid: "scene-result-caption" });
  const resultBox = el("figure", { className: "scene-result-box", testid: "scene-result-box", hidden: true },
    resultMedia, el("figcaption", { className: "row" }, resultCaption, resultLink));

  const img = el("img", { alt: "The photo", className: "scene-photo" });
  const boxes = el("div", { className: "scene-boxes", testid: "scene-boxes" });
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("preserveAspectRatio", "none");
  const stage = el("div", { className: "scene-stage", testid: "scene-stage", hidden: true }, img, boxes, svg);
  const list = el("ol", { className: "scene-characters", testid: "scene-characters" });
  const add = el("button", { type: "button", testid: "scene-add", text: "Add one the detector missed" });
  const bgName = "scene-bg-" + Math.random().toString(36).slice(2, 8);
  const radio = (value, label) => el("label", { className: "check" },
    el("input", { type: "radio", name: bgName, value, testid: `scene-bg-${value}` }), ` ${label}`);
  const colour = el("input", { type: "color", value: "#fdf6e3", testid: "scene-bg-colour-value",
    "aria-label": "Background colour" });
  const picture = el("input", { type: "file", accept: "image/*", testid: "scene-bg-picture-file" });
  const background = el("fieldset", { className: "scene-background", testid: "scene-background" },
    el("legend", { text: "Background" }),
    radio("page", "The paper (drawings taken out)"),
    el("span", {}, radio("colour", "A colour"), " ", colour),
    el("label", { className: "check" }, el("input", { type: "radio", name: bgName, value: "image",
      testid: "scene-bg-image" }), " A picture ", picture),
    radio("none", "None (transparent)"));
  const play = el("button", { type: "button", className: "primary", testid: "scene-play", text: "Play the scene" });
  const bar = el("progress", { max: 1, testid: "scene-progress", hidden: true });
  const format = el("select", { testid: "scene-format", "aria-label": "Download format" },
    ...FORMATS.map(([value, label]) => el("option", { value, text: label })));
  const size = el("select", { testid: "scene-size", "aria-label": "Download size (the longer side)" },
    ...SIZES.map(([value, label]) => el("option", { value, text: label })));
  const download = el("button", { type: "button", testid: "scene-download", text: "Download" });
  const downloads = el("fieldset", { className: "scene-downloads" }, el("legend", { text: "Download" }),
    el("div", { className: "row" }, el("label", {}, "Format ", format), el("label", {}, "Size ", size), download));

  // placing a new character's joints: the studio's editor on the page's photo
  const editorStage = el("div", { id: "stage", tabindex: "0",
    "aria-label": "The new character: drag each joint onto the drawing (the box's corners resize it)" },
  el("canvas", { className: "photo" }), el("canvas", { className: "tint" }));
  const editorSvg = document.createElementNS(SVG, "svg");
  editorSvg.setAttribute("preserveAspectRatio", "none");
  editorSvg.setAttribute("aria-hidden", "true");
  editorStage.append(editorSvg);
  const editorHint = el("p", { className: "hint", "aria-live": "polite", testid: "scene-joints-hint" });
  const addSave = el("button", { type: "button", className: "primary", testid: "scene-add-save", text: "Add to the scene" });
  const addReset = el("button", { type: "button", testid: "scene-add-reset", text: "Reset the joints" });
  const addCancel = el("button", { type: "button", className: "quiet", testid: "scene-add-cancel", text: "Cancel" });
  const addPanel = el("div", { className: "scene-add-panel", testid: "scene-add-panel", hidden: true },
    el("h3", { text: "Place its joints" }),
    el("p", { className: "hint", text: "Drag each joint onto the drawing: the blue ones are the figure's left " +
      "(on your right when it faces you), the orange ones its right. The box's corners resize the box." }),
    el("div", { className: "stage-column" }, editorStage), editorHint,
    el("div", { className: "row" }, addSave, addReset, addCancel));

  const editing = el("div", { className: "scene-edit", hidden: true }, resultBox, addPanel,
    el("div", { className: "scene-layout" }, stage,
      el("div", { className: "scene-controls" }, list, el("div", { className: "row" }, add), background,
        el("div", { className: "row" }, play, bar), downloads, expiry)));
  section.append(h2, hint, el("div", { className: "row" }, create), modelsNote, error, status, editing);
  const buttons = [create, add, play, download, addSave];

  function say(text) {
    status.textContent = text || "";
  }

  function fail(err) {
    error.hidden = !err;
    error.textContent = !err ? "" : typeof err === "string" ? err : describe(err); // a string: the page's own words
  }

  function note(text) {
    modelsNote.hidden = !text;
    modelsNote.querySelector("p").textContent = text || "";
  }

  async function guarded(work) {
    if (state.busy) return;
    state.busy = true;
    fail(null);
    for (const b of buttons) b.disabled = true;
    try {
      await work();
    } catch (err) {
      fail(err);
    } finally {
      state.busy = false;
      for (const b of buttons) b.disabled = false;
      play.disabled = download.disabled = !state.scene; // before the first character: nothing to play
    }
  }

  async function loadMotions() {
    if (state.motions.length) return;
    const lib = await call("GET", "motions");
    state.motions = lib.motions.map((m) => ({ name: m.name, title: m.title || m.name }));
  }

  /** The page's size in image pixels (the scene's, or the photo's before there is a scene). */
  const pageSize = () => (state.scene ? state.scene.image : state.page);

  // --- the photo and its boxes -------------------------------------------------------------------

  function draw() {
    const { width, height } = pageSize();
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.replaceChildren();
    if (state.drawing?.rect) svg.append(state.drawing.rect);
    const chars = state.scene ? state.scene.characters : [];
    boxes.replaceChildren(...chars.map((c, i) => boxOf(c, i)).filter(Boolean));
    list.replaceChildren(...chars.map((c, i) => row(c, i)));
    if (!state.scene) return;
    const kind = state.scene.background.kind;
    section.querySelectorAll(`input[name="${bgName}"]`).forEach((input) => { input.checked = input.value === kind; });
    if (kind === "colour") colour.value = state.scene.background.colour;
  }

  function place(node, [l, t, r, b]) {
    const { width, height } = pageSize();
    Object.assign(node.style, { left: `${(100 * l) / width}%`, top: `${(100 * t) / height}%`,
      width: `${(100 * (r - l)) / width}%`, height: `${(100 * (b - t)) / height}%` });
  }

  function boxOf(c, i) {
    if (!c.bbox) return null;
    const node = el("div", { className: "scene-box", tabindex: "0", role: "button", testid: `scene-box-${i}`,
      "aria-label": `Character ${i + 1}: drag it, or select it and use the arrow keys, to move it on the page` },
    el("span", { className: "scene-label", text: String(i + 1) }));
    // a moved character shows its drawing where it now stands (the photo still has it where it was drawn)
    if (c.moved && c.urls?.texture) node.prepend(el("img", { src: c.urls.texture, alt: "", className: "scene-moved-drawing", draggable: false }));
    node.classList.toggle("selected", state.selected === c.id);
    node.classList.toggle("moved", Boolean(c.moved));
    place(node, c.bbox);
    node.addEventListener("pointerdown", (e) => startDrag(e, c, node));
    node.addEventListener("keydown", (e) => keyMove(e, c, node));
    node.addEventListener("focus", () => select(c.id));
    return node;
  }

  function select(id) {
    state.selected = id;
    boxes.querySelectorAll(".scene-box").forEach((b, i) => {
      b.classList.toggle("selected", state.scene.characters[i]?.id === id);
    });
  }

  /** A box's new top-left corner, kept so the whole box stays on the page. */
  function keptOnPage([l, t, r, b], dx, dy) {
    const { width, height } = pageSize();
    const x = clamp(l + dx, 0, Math.max(0, width - (r - l)));
    const y = clamp(t + dy, 0, Math.max(0, height - (b - t)));
    return [x, y, x + (r - l), y + (b - t)];
  }

  function startDrag(e, c, node) {
    if (state.busy || state.drawing || state.drag || (e.pointerType === "mouse" && e.button !== 0)) return;
    e.preventDefault();
    node.setPointerCapture(e.pointerId);
    node.focus({ preventScroll: true });
    const rect = stage.getBoundingClientRect();
    state.drag = { id: c.id, node, pointerId: e.pointerId, x0: e.clientX, y0: e.clientY, box0: [...c.bbox],
      box: [...c.bbox], k: pageSize().width / rect.width, moved: false };
  }

  function onDragMove(e) {
    const d = state.drag;
    if (!d || d.pointerId !== e.pointerId) return;
    e.preventDefault();
    const dx = e.clientX - d.x0;
    const dy = e.clientY - d.y0;
    if (!d.moved && Math.hypot(dx, dy) < DRAG_SLOP_PX) return;
    d.moved = true;
    d.box = keptOnPage(d.box0, dx * d.k, dy * d.k);
    place(d.node, d.box);
  }

  function onDragEnd(e, cancelled = false) {
    const d = state.drag;
    if (!d || d.pointerId !== e.pointerId) return;
    state.drag = null;
    if (d.node.hasPointerCapture(e.pointerId)) d.node.releasePointerCapture(e.pointerId);
    if (cancelled || !d.moved) {
      place(d.node, d.box0);
      return;
    }
    moveTo(d.id, d.box);
  }

  function moveTo(id, box) {
    guarded(() => patch({ characters: [{ id, at: [round1(box[0]), round1(box[1])] }] },
      "Moved. Play the scene to see it there."));
  }

  function keyMove(e, c, node) {
    const dirs = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    if (!dirs[e.key] || state.busy) return;
    e.preventDefault();
    const step = e.shiftKey ? KEY_STEP.shift : KEY_STEP.normal;
    c.bbox = keptOnPage(c.bbox, dirs[e.key][0] * step, dirs[e.key][1] * step);
    place(node, c.bbox);
    say("Moving… (saved when you stop)");
    clearTimeout(state.keyTimer);
    state.keyTimer = setTimeout(() => moveTo(c.id, c.bbox), KEY_SAVE_MS);
  }

  function row(c, i) {
    const select = el("select", { testid: `scene-motion-${i}`, "aria-label": `Motion of character ${i + 1}` });
    for (const m of state.motions) select.append(el("option", { value: m.name, text: m.title }));
    select.value = c.motion;
    select.addEventListener("change", () => guarded(() => patch({ characters: [{ id: c.id, motion: select.value }] })));
    const back = el("button", { type: "button", testid: `scene-reset-${i}`, text: "Put back",
      title: "Put it back where it was drawn on the page" });
    back.hidden = !c.moved;
    back.addEventListener("click", () => guarded(() => patch({ characters: [{ id: c.id, at: null }] },
      "Back where it was drawn.")));
    const fix = el("button", { type: "button", testid: `scene-fix-${i}`, text: "Fix" });
    fix.addEventListener("click", () => onFix && onFix(c.id));
    fix.hidden = !onFix;
    const drop = el("button", { type: "button", className: "quiet", testid: `scene-drop-${i}`, text: "Drop" });
    drop.disabled = state.scene.characters.length < 2;
    drop.addEventListener("click", () => guarded(() => patch({ characters: [{ id: c.id, drop: true }] })));
    return el("li", { testid: `scene-character-${i}` }, el("span", { className: "scene-number", text: String(i + 1) }),
      select, back, fix, drop, c.missing ? el("span", { className: "hint", text: " (gone: drop it)" }) : "");
  }

  async function patch(body, done = "Saved. Play the scene to see it move.") {
    const answer = await request("PATCH", `scenes/${state.scene.id}`, body instanceof FormData ? { form: body } : { json: body });
    show(answer.body);
    say(done);
  }

  /** Show a scene document (and the results this browser keeps of its version). */
  function show(doc) {
    state.scene = doc;
    state.page = { width: doc.image.width, height: doc.image.height };
    expiry.textContent = keptUntil(doc);
    draw();
    showResults();
  }

  // --- results: the preview above the photo, downloads ---------------------------------------------

  function showResults() {
    const kept = storedResults(state.scene.id);
    const fresh = kept && kept.version === state.scene.version ? kept : null;
    const preview = fresh?.preview;
    resultBox.hidden = !preview;
    resultMedia.replaceChildren();
    resultLink.hidden = true;
    if (!preview) return;
    resultMedia.append(el("img", { src: preview.url, alt: "The scene, every character moving",
      className: "scene-result", testid: "scene-result" }));
    resultCaption.textContent = `Every character moving (${preview.width}×${preview.height}).`;
    if (fresh.download) showDownload(fresh.download);
  }

  function keepResult(part, value) {
    const kept = storedResults(state.scene.id);
    const base = kept && kept.version === state.scene.version ? kept : { version: state.scene.version };
    storeResults(state.scene.id, { ...base, [part]: value });
  }

  /** A readable file name: "scene-3-characters-500x376.gif". */
  function fileName(fmt, width, height) {
    const ext = (FORMATS.find(([v]) => v === fmt) || [fmt, fmt, fmt])[2];
    const n = state.scene.characters.length;
    return `scene-${n}-character${n === 1 ? "" : "s"}-${width}x${height}.${ext}`;
  }

  /** Save the file under its readable name: fetched, then handed to the browser as a blob (a link's
   * `download` name is ignored for a file of another origin, e.g. S3). */
  async function save(d) {
    const headers = sameOrigin(d.url) && getToken() ? { Authorization: `Bearer ${getToken()}` } : {};
    let response;
    try {
      response = await fetch(d.url, { headers });
    } catch {
      throw new ApiError(0, "network", "network error");
    }
    if (!response.ok) {
      throw new ApiError(response.status, response.status === 404 ? "expired" : "download_failed",
        "the file could not be fetched");
    }
    const href = URL.createObjectURL(await response.blob());
    const a = el("a", { href, download: d.name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 60_000);
  }

  resultLink.addEventListener("click", (e) => {
    const d = state.download;
    if (!d) return;
    e.preventDefault();
    guarded(() => save(d));
  });

  function showDownload(d) {
    state.download = d;
    resultLink.href = d.url;
    resultLink.download = d.name;
    resultLink.textContent = `Download ${d.name}`;
    resultLink.hidden = false;
    if (!resultBox.hidden) return;
    // a download without a preview yet: show the file itself where the browser plays it
    resultBox.hidden = false;
    resultMedia.replaceChildren(VIDEOS.has(d.format)
      ? el("video", { src: d.url, autoplay: true, loop: true, muted: true, playsInline: true, controls: true })
      : IMAGES.has(d.format) ? el("img", { src: d.url, alt: "The scene", className: "scene-result" })
        : el("p", { className: "hint", text: "This format is a file to download, not something the page plays." }));
    resultCaption.textContent = "";
  }

  /** Progress of a render, said under the photo. */
  const progressOf = (what) => (s) => {
    if (s.stage === "waiting") say(`${waitWords(s.reason, s.retryIn)}…`);
    else if (s.framesTotal) {
      bar.value = s.framesDone / s.framesTotal;
      say(`${what}: frame ${s.framesDone} of ${s.framesTotal}…`);
    } else say(s.stage === "queued" ? `${what}: waiting for a free renderer…` : `${what}…`);
  };

  /** Render `body`; its job is kept (`kind`: "preview" or "download"), so a reload follows it on. */
  async function rendered(body, what, kind) {
    bar.hidden = false;
    bar.removeAttribute("value");
    try {
      return await renderJob(`scenes/${state.scene.id}/animations`, body, progressOf(what),
        { onJob: (job) => keepResult("pending", { job, kind, format: body.format, size: body.size || null }) });
    } finally {
      keepResult("pending", null);
      bar.hidden = true;
    }
  }

  function showPreview(answer) {
    keepResult("preview", { url: answer.animation, width: answer.width, height: answer.height });
    showResults();
    say("Every character is moving.");
    reveal(resultBox);
  }

  function downloadOf(answer, fmt) {
    const d = { url: answer.animation, format: fmt, name: fileName(fmt, answer.width, answer.height) };
    keepResult("download", d);
    showDownload(d);
    return d;
  }

  /** After a reload: the render this page had asked for and not seen end, followed on (its job). */
  async function resume() {
    const kept = storedResults(state.scene.id);
    const p = kept && kept.version === state.scene.version ? kept.pending : null;
    if (!p) return;
    const what = p.kind === "download" ? "Making the file" : "Drawing the scene";
    say(`Still ${what.toLowerCase()} (asked for before the page was reloaded)…`);
    await guarded(async () => {
      bar.hidden = false;
      bar.removeAttribute("value");
      let answer;
      try {
        answer = await resumeJob(p.job, progressOf(`Still ${what.toLowerCase()}`));
      } finally {
        keepResult("pending", null);
        bar.hidden = true;
      }
      if (p.kind === "download") {
        const d = downloadOf(answer, p.format);
        say(`${d.name} is ready: press its Download to save it.`);
        reveal(resultBox);
      } else showPreview(answer);
    });
  }

  play.addEventListener("click", () => guarded(async () => {
    show(await call("GET", `scenes/${state.scene.id}`)); // a character fixed meanwhile: its new box
    showPreview(await rendered({ format: "gif" }, "Drawing the scene", "preview"));
  }));

  download.addEventListener("click", () => guarded(async () => {
    const body = { format: format.value };
    if (size.value) body.size = Number(size.value);
    let answer;
    try {
      answer = await rendered(body, "Making the file", "download");
    } catch (err) { // a sheet that cannot fit: refused before the work, in the page's words
      throw sheetTooBig(err, `this scene at ${size.value ? `${size.value} px` : "the server's default size"}`,
        SIZES.map(([v]) => Number(v)).filter(Boolean)) || err;
    }
    const d = downloadOf(answer, format.value);
    await save(d); // the browser saves it (the link stays, to save it again)
    say(`${d.name} is ready.`);
    reveal(resultBox);
  }));

  function reveal(node) {
    node.scrollIntoView({ block: "start", behavior: "instant" });
  }

  // --- opening a scene, making one ---------------------------------------------------------------

  async function open(doc) {
    await loadMotions();
    state.selected = null;
    img.src = doc.urls.page;
    create.hidden = true;
    stage.hidden = false;
    editing.hidden = false;
    section.hidden = false;
    show(doc);
    if (onOpen) onOpen(doc);
    const n = doc.characters.length;
    const skipped = (doc.skipped || []).length;
    say(`${n} character${n === 1 ? "" : "s"} on the page${skipped ? ` (${skipped} more box${skipped === 1 ? "" : "es"} left out)` : ""}. ` +
      "Drag a box to move its character.");
    if ((doc.warnings || []).some((w) => w.code === "tiny_models")) {
      state.tiny = true;
      note(TINY);
    } else if ((doc.warnings || []).some((w) => FOUND_BY.has(w.code))) {
      state.finder = true;
      note(FINDER);
    }
    resume(); // a render asked for before a reload: followed on (not awaited: the page is ready meanwhile)
  }

  /** The scene again from the server (a character fixed elsewhere, the page back from the cache). */
  async function refresh() {
    if (!state.scene) return;
    cancelAdd();
    state.drawing = null;
    stage.classList.remove("drawing");
    show(await call("GET", `scenes/${state.scene.id}`));
  }

  /** Before a scene exists (the models found nothing): the photo alone, to add the drawings by hand. */
  async function openPhoto(file) {
    await loadMotions();
    state.photo = await createImageBitmap(file);
    state.page = { width: state.photo.width, height: state.photo.height };
    img.src = URL.createObjectURL(file);
    create.hidden = true;
    stage.hidden = false;
    editing.hidden = false;
    section.hidden = false;
    draw();
    play.disabled = download.disabled = true; // nothing to play before the first character
    say("Add each drawing: press “Add one the detector missed”, drag a box around it, then place its joints.");
    if (onPhoto) onPhoto(file); // kept until the first character makes the scene (a reload shows it again)
  }

  const makeScene = () => guarded(async () => {
    if (!state.file) return;
    say("Uploading…");
    try {
      const doc = await waitingOut(() => upload("scenes", state.file, (f) =>
        say(f === null ? "Finding every character, its mask and joints…" : `Uploading ${Math.round(f * 100)} %`)),
      (code, left) => say(`${waitWords(code, left, "sending the photo again")}…`), { maxWaitS: 120 });
      await open(doc);
    } catch (err) {
      const byHand = err instanceof ApiError && (err.warnings || []).some((w) => w.code === "tiny_models");
      if (!(err instanceof ApiError) || !(byHand || ["no_character", "no_skeleton", "invalid_character",
        "models_unavailable", "model_server_unavailable", "model_server_error"].includes(err.code))) throw err;
      if (byHand) note(TINY);
      await openPhoto(state.file);
      fail(err);
    }
    editing.scrollIntoView({ block: "start" });
  });
  create.addEventListener("click", makeScene);

  // --- "Add one": a box, then its joints in the studio's editor ---------------------------------

  add.addEventListener("click", () => {
    if (!state.scene && !state.photo) return;
    cancelAdd();
    state.drawing = { start: null, rect: null };
    stage.classList.add("drawing");
    say("Drag a box around the drawing that is missing.");
  });
  function imagePoint(e) {
    const box = svg.getBoundingClientRect();
    const { width, height } = pageSize();
    return [clamp((e.clientX - box.left) / box.width * width, 0, width),
      clamp((e.clientY - box.top) / box.height * height, 0, height)];
  }
  svg.addEventListener("pointerdown", (e) => {
    if (!state.drawing) return;
    e.preventDefault();
    svg.setPointerCapture(e.pointerId);
    state.drawing.start = imagePoint(e);
    state.drawing.rect = document.createElementNS(SVG, "rect");
    state.drawing.rect.setAttribute("class", "scene-new-box");
    svg.append(state.drawing.rect);
  });
  svg.addEventListener("pointermove", (e) => {
    const d = state.drawing;
    if (!d?.start) return;
    const [x, y] = imagePoint(e);
    const [x0, y0] = d.start;
    Object.entries({ x: Math.min(x, x0), y: Math.min(y, y0), width: Math.abs(x - x0), height: Math.abs(y - y0) })
      .forEach(([k, v]) => d.rect.setAttribute(k, v));
  });
  svg.addEventListener("pointerup", (e) => {
    const d = state.drawing;
    if (!d?.start) return;
    const [x, y] = imagePoint(e);
    const [x0, y0] = d.start;
    state.drawing = null;
    stage.classList.remove("drawing");
    d.rect.remove();
    const box = [Math.min(x, x0), Math.min(y, y0), Math.max(x, x0), Math.max(y, y0)].map(round1);
    if (box[2] - box[0] < 8 || box[3] - box[1] < 8) {
      say("That box is too small: press Add and drag around the drawing.");
      return;
    }
    guarded(() => placeJoints(box));
  });
  stage.addEventListener("pointermove", onDragMove);
  stage.addEventListener("pointerup", (e) => onDragEnd(e));
  stage.addEventListener("pointercancel", (e) => onDragEnd(e, true));

  function editor() {
    if (!state.editor) {
      state.editor = new Editor(editorStage);
      state.editor.addEventListener("hint", (e) => { editorHint.textContent = e.detail; });
      // a new box drawn beside the old one: a standing figure in it again
      state.editor.addEventListener("newbox", (e) => {
        state.editor.placeJoints(skeletonIn(e.detail), SKELETON);
        state.editor.setWholePhoto(false);
      });
    }
    return state.editor;
  }

  /**
   * The joints of a new character in `box`: where the server can fit them (trained models, or the ink
   * finder where there are none) it cuts the character out with its fitted skeleton at once, and the
   * editor opens on those joints to check (Save sends what the person moved); where it cannot (tiny
   * random models, nothing figure-like in the box, no scene yet) the editor opens with a standing
   * figure scaled to the box, sent with "Add to the scene".
   */
  async function placeJoints(box) {
    say("Opening the photo for the joints…");
    if (!state.photo) state.photo = state.scene ? await fetchBitmap(state.scene.urls.page) : state.photo;
    const { width, height } = pageSize();
    let doc = null;
    if (state.scene && !state.tiny) {
      say("Fitting a skeleton to the drawing in the box…");
      try {
        const before = new Set(state.scene.characters.map((c) => c.id));
        await patch({ add: [{ bbox: box }] }, "Added: check its joints.");
        const made = state.scene.characters.find((c) => !before.has(c.id));
        if (made) doc = await call("GET", `characters/${encodeURIComponent(made.id)}`);
      } catch (err) {
        if (!(err instanceof ApiError && FIT_MISSED.has(err.code))) throw err;
      }
    }
    state.fitted = doc;
    doc = doc || { draft: true, id: null, version: 0, image: { width, height }, bbox: box, joints: skeletonIn(box),
      skeleton: SKELETON, detections: [], urls: {} };
    addPanel.hidden = false;
    addSave.textContent = state.fitted ? "Save its joints" : "Add to the scene";
    const ed = editor();
    ed.setWholePhoto(false);
    ed.load(doc, state.photo, null, null);
    editorHint.textContent = state.fitted
      ? "The server fitted these joints: drag any that is off onto its place, then “Save its joints”."
      : "Drag each joint onto its place on the drawing, then “Add to the scene”.";
    say(state.fitted ? "Check the new character's joints." : "Place the joints on the new character.");
    addPanel.scrollIntoView({ block: "start", behavior: "instant" });
  }

  function cancelAdd() {
    addPanel.hidden = true;
  }

  addReset.addEventListener("click", () => state.editor?.revert(null));
  addCancel.addEventListener("click", () => {
    cancelAdd();
    say("");
  });
  addSave.addEventListener("click", () => guarded(async () => {
    const edits = editor().edits();
    if (state.fitted) { // already in the scene: only what the person moved goes to the character
      if (edits.joints || edits.bbox) {
        say("Saving its joints…");
        await request("PATCH", `characters/${encodeURIComponent(state.fitted.id)}`,
          { json: edits, ifMatch: `"${state.fitted.version}"` });
        show(await call("GET", `scenes/${state.scene.id}`));
      }
      state.fitted = null;
      cancelAdd();
      say("Saved. Play the scene to see it move.");
      return;
    }
    if (!edits.bbox) return;
    const character = { bbox: edits.bbox, joints: edits.joints };
    say("Cutting out the new character…");
    if (state.scene) {
      await patch({ add: [character] }, "Added. Play the scene to see it move.");
    } else {
      const doc = await upload("scenes", state.file, () => {}, { characters: JSON.stringify([character]) });
      await open(doc);
      play.disabled = false;
      say("Added. Add the others the same way, then play the scene.");
    }
    cancelAdd();
    stage.scrollIntoView({ block: "nearest", behavior: "instant" });
  }));

  section.addEventListener("change", (e) => {
    const target = e.target;
    if (!state.scene) return;
    if (target.name === bgName && target.value !== "image") {
      const value = target.value === "colour" ? colour.value : target.value;
      guarded(() => patch({ background: value }));
    } else if (target === colour) {
      guarded(() => patch({ background: colour.value }));
    } else if (target === picture && picture.files[0]) {
      const form = new FormData();
      form.append("background", picture.files[0], picture.files[0].name || "background");
      guarded(() => patch(form));
      picture.value = "";
    }
  });

  /** Say, above the scene, when the models cannot find drawings (not ready, or the tiny random ones). */
  async function watchModels() {
    const models = await modelsState();
    if (state.tiny || state.finder) return;
    if (models.state === "ready") {
      note(null);
      return;
    }
    note(`${models.detail || MODELS_WORDS[models.state] || MODELS_WORDS.starting} Meanwhile add each drawing ` +
      "yourself: its box, then its joints.");
    setTimeout(watchModels, Math.min(30, Math.max(2, Number(models.retry_after_s) || 5)) * 1000);
  }
  watchModels();

  return {
    /** A photo was uploaded: offer to animate every character in it. */
    offer(file) {
      state.file = file;
      state.scene = null;
      state.photo = null;
      section.hidden = false;
      create.hidden = false;
    },
    open,
    /** The photo of a scene not made yet (kept across a reload), to add its drawings by hand. */
    async reopen(file) {
      state.file = file;
      await openPhoto(file);
      say("The photo you chose before the page was reloaded: add each drawing with “Add one the detector " +
        "missed” (its box, then its joints).");
    },
    /** Make the scene of the offered photo now (the scenes page does at once). */
    create: makeScene,
    refresh,
    fail,
  };
}

// The studio page's flow: photo -> character (box, mask, skeleton) -> edits saved -> motions -> render.
// Every step is a call of the public character API (docs/api.md); nothing here is private to it.

import { ApiError, call, describe, fetchBitmap, getToken, keptUntil, modelsState, retrySeconds, setToken, sheetTooBig, sleep,
  upload } from "./api.js";
import { etagOf, maskGrid } from "./character.js";
import { Editor } from "./editor.js";
import { draftFrom, skeletonIn } from "./manual.js";
import { resumeJob, waitingOut, waitWords } from "./jobs.js";
import { Gallery, MotionPicker, urlsOf } from "./motions.js";

const $ = (id) => document.getElementById(id);
const ui = {
  token: $("token"), tokenBox: $("token-box"),
  upload: $("upload"), camera: $("camera"), manual: $("upload-manual"), progress: $("progress"), progressBar: $("progress-bar"), progressText: $("progress-text"),
  error: $("error"), modelsNote: $("models-note"), fixNote: $("fix-note"),
  fix: $("step-fix"), stage: $("stage"), hint: $("hint"), save: $("save"), saveState: $("save-state"), fixError: $("fix-error"),
  undo: $("undo"), revert: $("revert"), brushSize: $("brush-size"), showMask: $("show-mask"), whole: $("whole-photo"),
  overlay: $("overlay"), overlayCaption: $("overlay-caption"), remove: $("delete"),
  detections: $("detections"), motionsStep: $("step-motions"), motions: $("motions"), credits: $("credits"), format: $("format"), size: $("size"), render: $("render"), renderState: $("render-state"),
  renderProgress: $("render-progress"), renderBar: $("render-bar"),
  results: $("step-results"), animations: $("animations"), chosen: $("chosen"),
  video: $("video"), videoCamera: $("video-camera"), videoStart: $("video-start"), videoEnd: $("video-end"), videoState: $("video-state"), videoError: $("video-error"),
  renderError: $("render-error"),
};

const editor = new Editor(ui.stage);
const picker = new MotionPicker(ui.motions, () => Object.keys(editor.edits()).length > 0);
const gallery = new Gallery(ui.animations);
// `file`: the photo of a draft (state.doc.draft: opened in the page, not yet sent to the server).
const state = { doc: null, photo: null, mask: null, file: null, busy: false, motions: [], defaults: [], categories: [] };
// Figures the page measures (tests and curious people read them from the console).
window.studio = { timings: [], previews: () => picker.shown };

// --- errors and progress ----------------------------------------------------------------------

/** Every place an error is shown: the page's box under the photo step, and one beside each action. */
function errorPlaces() {
  return document.querySelectorAll("[data-error-place]");
}

/**
 * Show `err` (an ApiError, an Error or a sentence) in words; `action` adds a button {label, run}.
 * `at`: where (an error place beside the control that failed; the page's box by default).
 * `showError(null)` clears every place.
 */
function showError(err, action = null, at = ui.error) {
  for (const place of err ? [at] : errorPlaces()) {
    place.replaceChildren();
    place.hidden = true;
  }
  if (!err) return;
  const box = at;
  console.warn("studio:", err);
  const text = document.createElement("p");
  text.textContent = typeof err === "string" ? err : describe(err);
  box.append(text);
  if (err instanceof ApiError && (err.code !== "network" || err.requestId)) {
    const detail = document.createElement("small");
    detail.textContent = [err.status && `HTTP ${err.status}`, err.code, err.requestId && `request ${err.requestId}`].filter(Boolean).join(" · ");
    box.append(detail);
  }
  if (action) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = action.label;
    button.dataset.testid = "error-action";
    button.addEventListener("click", action.run, { once: true });
    box.append(button);
  }
  box.hidden = false;
  if (err instanceof ApiError && err.status === 401) {
    ui.tokenBox.open = true;
    ui.token.focus();
  }
  reveal(box, "nearest");
}

/** Scroll `el` into view, smoothly unless the person asked for reduced motion. */
function reveal(el, block) {
  const smooth = !matchMedia("(prefers-reduced-motion: reduce)").matches;
  el.scrollIntoView({ block, behavior: smooth ? "smooth" : "auto" });
}

function progress(text, fraction) {
  ui.progress.hidden = text === null;
  ui.progressText.textContent = text || "";
  if (fraction === undefined || fraction === null) ui.progressBar.removeAttribute("value");
  else ui.progressBar.value = fraction;
}

/** Run `work` with the page marked busy (buttons that would race it are disabled); its error is
 * shown `at` (an error place). */
async function busy(work, at = ui.error) {
  if (state.busy) return undefined;
  state.busy = true;
  document.body.classList.add("busy");
  refreshButtons();
  try {
    return await work();
  } catch (err) {
    showError(err, null, at);
    return undefined;
  } finally {
    state.busy = false;
    document.body.classList.remove("busy");
    refreshButtons();
  }
}

// --- step 1: the photo -------------------------------------------------------------------------

// Errors after which placing the box and joints by hand is the way on.
const MODELS_MISSED = new Set(["no_character", "no_skeleton", "invalid_character", "models_unavailable",
  "model_server_unavailable", "model_server_error"]);
const BY_HAND = "Place the box and joints myself";
const TINY_MODELS = "This server runs tiny random-initialised models, built for testing and never trained: " +
  "what they find in a photo is meaningless. Put the box around the drawing and the joints on it yourself, then Save.";

/** True when an answer's `warnings` say the model server runs the tiny random models. */
function tinyModels(warnings) {
  return (warnings || []).some((w) => w.code === "tiny_models");
}

// The ink finder found the box and joints (no trained weights: on the model server, or in the app
// while the model server is not ready): the editor opens on them, and says to check them.
const FOUND_BY = new Set(["found_by_ink_finder", "found_by_ink_finder_in_app"]);

/** A sentence for the person when an answer's `warnings` say the ink finder placed the box and joints. */
function finderNote(warnings) {
  const w = (warnings || []).find((x) => FOUND_BY.has(x.code));
  if (!w) return "";
  const where = w.code === "found_by_ink_finder_in_app" ? " (the model server is not ready yet, so the app's own)" : "";
  return `The ink finder${where} found the drawing's box, mask and joints by reading the ink, with no trained ` +
    "model: check them, and drag the box or a joint that is off, then Save.";
}

function showFinderNote(doc) {
  const note = finderNote(doc.warnings);
  if (!note) return;
  ui.fixNote.textContent = note;
  ui.fixNote.hidden = false;
}

/** Make a character of `file` with the models; when they miss, offer placing the box and joints by hand. */
async function createFrom(file) {
  if (!file) return;
  showError(null);
  let missed = null;
  let tiny = false;
  await busy(async () => {
    try {
      progress("Uploading…", 0);
      // this person's other render holding their render slot: the photo goes again when it is done
      const doc = await waitingOut(() => upload("characters", file, (f) =>
        f === null ? progress("Finding the drawing, its mask and joints…", null) : progress(`Uploading ${Math.round(f * 100)} %`, f)),
      (code, left) => progress(waitWords(code, left, "sending the photo again"), null), { maxWaitS: 120 });
      if (tinyModels(doc.warnings)) {
        // what the tiny models found is noise: no editor full of it; the photo is placed by hand
        tiny = true;
        call("DELETE", `characters/${encodeURIComponent(doc.id)}`).catch(() => {}); // it expires anyway
        return;
      }
      progress("Loading the character…", null);
      await open(doc);
      showFinderNote(doc);
      reveal(ui.fix, "start");
    } catch (err) {
      if (err instanceof ApiError && tinyModels(err.warnings)) tiny = true;
      else if (err instanceof ApiError && MODELS_MISSED.has(err.code)) missed = err;
      else throw err;
    } finally {
      progress(null);
      for (const input of [ui.upload, ui.camera, ui.manual]) input.value = "";
    }
  });
  if (tiny) await openDraft(file, TINY_MODELS);
  else if (missed) showError(missed, { label: BY_HAND, run: () => openDraft(file) });
}

/**
 * Open `file` in the editor as a draft, asking the server nothing: the whole photo, the box of its
 * ink when that looks like one drawing (else the person draws it) and a standing figure's joints in
 * the box. Save sends them with the photo (the server then skips detection and pose).
 */
async function openDraft(file, why = "") {
  if (!file) return;
  showError(null);
  await busy(async () => {
    try {
      progress("Opening the photo…", null);
      const { doc, photo } = await draftFrom(file);
      picker.stop();
      state.doc = doc;
      state.photo = photo;
      state.mask = null;
      state.file = file;
      state.jointsPlaced = false;
      state.draftTiny = why === TINY_MODELS; // the server's pose model is noise: keep the template
      history.replaceState(null, "", location.pathname);
      ui.fix.hidden = false;
      ui.motionsStep.hidden = true;
      ui.results.hidden = true;
      ui.whole.checked = true;
      editor.setWholePhoto(true);
      editor.load(doc, photo, null, null);
      showOverlay(doc);
      showDetections(doc);
      ui.fixNote.textContent = why;
      ui.fixNote.hidden = !why;
      ui.saveState.textContent = "Not saved yet";
      draftHint();
      reveal(ui.fix, "start");
    } finally {
      progress(null);
      for (const input of [ui.upload, ui.camera, ui.manual]) input.value = "";
    }
  });
}

function draftHint() {
  ui.hint.textContent = editor.bbox
    ? "Drag each joint onto its place on the drawing (a press beside the drawing draws a new box), then Save."
    : "Press beside the drawing and drag across it to put a box around it: a skeleton appears in the box.";
}

// A box drawn on a draft whose joints are not placed yet: the view comes closer, and the server is
// asked to cut the drawing out of the box and fit its skeleton to it (POST /characters with the box
// and no joints: the pose model, or the ink finder where there are no trained weights; under the
// server's render slot and deadline). Meanwhile, and where it cannot (tiny random models, or nothing
// person-like in the box), a standing figure's joints in the box, to drag into place.
editor.addEventListener("newbox", (e) => {
  if (!state.doc?.draft) return;
  if (!state.jointsPlaced) {
    editor.placeJoints(skeletonIn(e.detail), state.doc.skeleton);
    ui.whole.checked = false;
    editor.setWholePhoto(false);
    if (!state.draftTiny && state.file) fitInBox(e.detail);
  }
  draftHint();
});

/** Ask the server for a character of the draft's photo with `bbox` and a skeleton fitted inside it. */
async function fitInBox(bbox) {
  const file = state.file;
  const draft = state.doc;
  await busy(async () => {
    progress("Fitting a skeleton to the drawing in the box…", null);
    try {
      const doc = await upload("characters", file, () => {}, { bbox: JSON.stringify(bbox.map((v) => Math.round(v * 10) / 10)) });
      if (state.doc !== draft || state.jointsPlaced) return; // the person moved on meanwhile
      await open(doc);
      showFinderNote(doc);
      ui.saveState.textContent = `Saved (version ${doc.version})`;
    } catch (err) {
      if (!(err instanceof ApiError && MODELS_MISSED.has(err.code))) throw err;
      ui.hint.textContent = "The server found no figure to fit in this box: drag each joint onto its place, then Save.";
    } finally {
      progress(null);
    }
  });
}

// --- step 2: the editor --------------------------------------------------------------------------

/** Show `doc`: its photo, mask and skeleton in the editor, its overlay, and motion previews. */
async function open(doc, { previews = true } = {}) {
  const grid = maskGrid(doc);
  const photoUrl = doc.urls.image;
  const [photo, mask] = await Promise.all([
    // a character's photo never changes; a draft's photo is the one just saved
    (state.doc?.id === doc.id || state.doc?.draft) && state.photo ? state.photo : fetchBitmap(photoUrl),
    grid && doc.urls.mask ? fetchBitmap(doc.urls.mask).catch((err) => (showError(err), null)) : null,
  ]);
  state.doc = doc;
  state.photo = photo;
  state.mask = mask;
  state.file = null;
  ui.fixNote.hidden = true;
  ui.fix.hidden = false;
  ui.motionsStep.hidden = false;
  editor.load(doc, photo, mask, grid);
  $("expiry").textContent = keptUntil(doc);
  history.replaceState(null, "", `#character=${encodeURIComponent(doc.id)}`);
  showOverlay(doc);
  showDetections(doc);
  refreshButtons();
  if (previews) startPreviews(doc);
}

/** When the detector found several drawings, a button per box puts the box there (then Save). */
function showDetections(doc) {
  const found = doc.detections || [];
  ui.detections.replaceChildren();
  ui.detections.hidden = found.length < 2;
  if (found.length < 2) return;
  const label = document.createElement("span");
  label.textContent = "Drawings found:";
  ui.detections.append(label);
  found.forEach((d, i) => {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.testid = `detection-${i}`;
    button.textContent = `${i + 1} (score ${Math.round(d.score * 100)} %)`;
    button.addEventListener("click", () => editor.setBox(d.bbox));
    ui.detections.append(button);
  });
  // several drawings on one page: all of them together, where they were drawn (the scenes page)
  const all = document.createElement("a");
  all.href = `studio-scenes#from=${encodeURIComponent(doc.id)}`;
  all.dataset.testid = "animate-all";
  all.textContent = `Animate all ${found.length} together`;
  ui.detections.append(all);
}

function showOverlay(doc) {
  ui.overlay.closest("figure").hidden = Boolean(doc.draft);
  if (doc.draft) return;
  ui.overlay.src = doc.urls.overlay;
  ui.overlayCaption.textContent = `The server's overlay of version ${doc.version}: box, mask and skeleton as they will be animated.`;
}

/** Previews of every motion, the first checked one first: resolves with {answered, playing} times. */
async function startPreviews(doc) {
  const first = picker.selected()[0] || state.defaults[0];
  try {
    const { answered, playing } = await picker.preview(doc, first);
    return { answered, playing: await playing };
  } catch (err) {
    // "aborted": a newer version's previews replaced these
    if (doc === state.doc && err.code !== "aborted") showError(err);
    return null;
  }
}

editor.addEventListener("change", (e) => {
  const edits = e.detail;
  const parts = [edits.bbox && "box", edits.joints && "joints", edits.mask && "mask"].filter(Boolean);
  ui.saveState.textContent = parts.length ? `Unsaved changes: ${parts.join(", ")}` : state.doc ? `Saved (version ${state.doc.version})` : "";
  ui.hint.textContent = "";
  refreshButtons();
});
editor.addEventListener("hint", (e) => {
  ui.hint.textContent = e.detail;
});
editor.addEventListener("select", (e) => {
  if (state.doc?.draft) state.jointsPlaced = true; // a new box keeps the joints placed by hand
  ui.hint.textContent = `Joint: ${e.detail.replaceAll("_", " ")}. Arrow keys move it (Shift: 10 px), N / P pick the next / previous joint.`;
});

async function save() {
  const edits = editor.edits();
  if (!Object.keys(edits).length) return;
  showError(null);
  const started = performance.now();
  const result = await busy(async () => {
    let doc = state.doc;
    ui.saveState.textContent = "Saving…";
    const path = `characters/${encodeURIComponent(doc.id)}`;
    let sent;
    if (doc.draft) {
      // The first save of a draft creates the character: the photo with the box and joints placed
      // here (the server skips detection and pose, and cuts the drawing out of the box).
      sent = performance.now();
      try {
        doc = await upload("characters", state.file, (f) => {
          ui.saveState.textContent = f === null ? "Cutting out the drawing…" : `Uploading ${Math.round(f * 100)} %`;
        }, { bbox: JSON.stringify(edits.bbox), joints: JSON.stringify(edits.joints) });
      } catch (err) {
        ui.saveState.textContent = "Not saved yet";
        throw err;
      }
    } else if (edits.mask) {
      // One multipart PATCH: the mask (painted on the current box) and any moved joints. The editor
      // never has a new box and mask strokes at once: a new box recomputes the mask.
      const form = new FormData();
      form.append("mask", await editor.maskPng(), "mask.png");
      if (edits.joints) form.append("joints", JSON.stringify(edits.joints));
      sent = performance.now();
      doc = await waitingOutBusy(() => call("PATCH", path, { form, ifMatch: etagOf(doc) }));
    } else {
      const body = {};
      if (edits.bbox) body.bbox = edits.bbox;
      if (edits.joints) body.joints = edits.joints;
      sent = performance.now();
      doc = await waitingOutBusy(() => call("PATCH", path, { json: body, ifMatch: etagOf(doc) }));
    }
    const saved = { sent, answered: performance.now() };
    const previewing = startPreviews(doc);
    await open(doc, { previews: false });
    return { saved, previewing, version: doc.version }; // wrapped: the page is not busy while the previews load
  }, ui.fixError);
  if (result === undefined) {
    editor.changed();
    return;
  }
  const preview = await result.previewing;
  if (preview?.playing) {
    // One figure per save: click -> first preview frame on screen, and where the time went.
    const ms = (t) => Math.round(t - started);
    const figure = {
      what: "save_to_preview_ms", version: result.version, ms: ms(preview.playing),
      patch_sent: ms(result.saved.sent), patch_answered: ms(result.saved.answered), preview_answered: ms(preview.answered),
    };
    window.studio.timings.push(figure);
    console.info(`studio: save -> first preview frame ${figure.ms} ms`, JSON.stringify(figure));
    if (state.doc.version === result.version && !Object.keys(editor.edits()).length) {
      ui.saveState.textContent = `Saved (version ${result.version}) · preview in ${(figure.ms / 1000).toFixed(2)} s`;
    }
  }
}

/**
 * `request()`, again after the Retry-After of a busy server (503 overloaded, 429): a person never
 * has to press Save twice because the pod's render slot was taken at that moment. Other errors, and
 * a server still busy after a minute, are the caller's.
 */
async function waitingOutBusy(request) {
  const until = performance.now() + 60_000;
  for (;;) {
    try {
      return await request();
    } catch (err) {
      const busyNow = err instanceof ApiError && ((err.status === 503 && err.code === "overloaded") || err.status === 429);
      if (!busyNow || performance.now() > until) throw err;
      const wait = retrySeconds(err, 1);
      ui.saveState.textContent = waitWords(err.code, Math.ceil(wait), "saving again");
      await sleep(wait);
      ui.saveState.textContent = "Saving…";
    }
  }
}

async function removeCharacter() {
  if (!state.doc || !confirm("Delete this character and its animations from the server?")) return;
  await busy(async () => {
    await call("DELETE", `characters/${encodeURIComponent(state.doc.id)}`);
    state.doc = null;
    history.replaceState(null, "", location.pathname);
    ui.fix.hidden = true;
    ui.motionsStep.hidden = true;
    ui.results.hidden = true;
    gallery.clear();
  });
}

// --- steps 3 and 4: motions and render ------------------------------------------------------------

async function loadMotions() {
  try {
    const answer = await call("GET", "motions");
    state.motions = answer.motions || [];
    state.defaults = answer.default || [];
    state.categories = answer.categories || [];
    picker.show(state.motions, state.defaults.slice(0, 1), state.categories);
    showCredits(state.motions);
    return true;
  } catch (err) {
    showError(err);
    return false;
  }
}

/** The credits under the picker: CMU's acknowledgement when a CMU clip is listed, and each motion's source. */
function showCredits(motions) {
  const list = ui.credits.querySelector("ul");
  list.replaceChildren(...motions.map((m) => {
    const li = document.createElement("li");
    li.textContent = `${m.title || m.name}: ${m.origin || "source not given"} (${m.licence || "licence not given"})`;
    return li;
  }));
  ui.credits.querySelector(".cmu").hidden = !motions.some((m) => m.cmu_trial);
  ui.credits.hidden = !motions.length;
}

/** The render's state in words (and the bar): queued, waiting for the server, frames done, time left. */
function renderStatus(what, state) {
  const bar = ui.renderBar;
  ui.renderProgress.hidden = false;
  // an attribute, not only the property: what the bar shows is in the DOM for tests and tools
  if (state.fraction === undefined || state.fraction === null) bar.removeAttribute("value");
  else bar.setAttribute("value", String(Math.round(state.fraction * 1000) / 1000));
  if (state.stage === "waiting") return waitWords(state.reason, state.retryIn);
  if (state.stage === "queued") return `Waiting for a render slot for ${what}…`;
  if (state.framesTotal) {
    const left = state.secondsLeft === null || state.secondsLeft === undefined ? ""
      : ` · about ${Math.max(1, Math.round(state.secondsLeft))} s left`;
    const stage = state.stage === "storing" ? "Storing" : "Rendering";
    return `${stage} ${what}: ${state.framesDone} / ${state.framesTotal} frames${left}`;
  }
  return `Rendering ${what}…`;
}

async function render() {
  const motions = picker.selected();
  if (!motions.length) {
    showError("Pick at least one motion to render.", null, ui.renderError);
    return;
  }
  showError(null);
  const note = Object.keys(editor.edits()).length ? " (saved version: Save first to include the unsaved edits)" : "";
  const what = motions.map((n) => picker.title(n)).join(", ") + note;
  const t0 = performance.now();
  ui.renderBar.removeAttribute("value");
  ui.renderState.textContent = `Rendering ${what}…`;
  picker.hold(); // previews wait: the person's render comes first
  let done;
  try {
    done = await busy(async () => {
      // a motion made from the person's video resolves on synchronous requests only
      const sync = motions.some((n) => state.motions.find((m) => m.name === n)?.category === OWN);
      const format = ui.format.value;
      const size = Number(ui.size.value) || null;
      const version = state.doc.version;
      let urls;
      try {
        urls = await gallery.render(state.doc, motions, format, size,
          (s) => { ui.renderState.textContent = renderStatus(what, s); }, { sync, title: (n) => picker.title(n),
            onJob: (job) => keep({ pending: { job, version, motions, format, size } }) });
      } catch (err) { // a sheet that cannot fit: refused before the work, in the page's words
        const titles = motions.map((n) => picker.title(n)).join(", ");
        throw sheetTooBig(err, `${titles} at ${size ? `${size} px` : "the server's default size"}`, SIZES) || err;
      }
      keep({ pending: null, results: { version, motions, format, size, urls } });
      return true;
    }, ui.renderError);
  } finally {
    picker.release();
    if (!done) keep({ pending: null });
  }
  if (done) ui.renderBar.setAttribute("value", "1");
  ui.renderProgress.hidden = !done;
  ui.renderState.textContent = done ? `Rendered version ${state.doc.version} in ${((performance.now() - t0) / 1000).toFixed(1)} s` : "";
  if (done) {
    ui.results.hidden = false;
    await mediaShown(ui.animations, 5);
    // the whole result in view: its bottom at the screen's when it fits, else its top
    reveal(ui.results, ui.results.offsetHeight <= window.innerHeight ? "end" : "start");
  }
}

// The render sizes the page offers (its size menu), for the words of a sheet that cannot fit.
const SIZES = [256, 512, 768, 1024];

// --- what a reload keeps: the chosen motions, the last animations, a render still running --------------
// Per character, in this browser (localStorage "doodlepod.studio.<id>"): {chosen: [names], results:
// {version, motions, format, size, urls}, pending: {job, version, motions, format, size}}. Results and a
// pending render belong to one version of the character: a saved edit makes them stale.

const KEPT = "doodlepod.studio.";

function kept(id = state.doc?.id) {
  try {
    return (id && JSON.parse(localStorage.getItem(KEPT + id) || "null")) || {};
  } catch {
    return {};
  }
}

function keep(part) {
  const id = state.doc?.id;
  if (!id) return;
  try {
    localStorage.setItem(KEPT + id, JSON.stringify({ ...kept(id), ...part }));
  } catch {
    // private mode or full: nothing survives a reload, as before
  }
}

/** After a reload: the chosen motions again, the last animations, and a render in progress followed on. */
async function restore(doc) {
  const k = kept(doc.id);
  const known = new Set(state.motions.map((m) => m.name));
  const chosen = (k.chosen || []).filter((n) => known.has(n));
  if (chosen.length) {
    picker.show(state.motions, chosen, state.categories);
    showChosen();
  }
  const title = (n) => picker.title(n);
  if (k.results?.version === doc.version && k.results.urls) {
    gallery.show(k.results.motions, k.results.urls, k.results.format, k.results.size, title);
    ui.results.hidden = false;
    ui.renderState.textContent = `Rendered version ${doc.version} (kept from before the page was reloaded)`;
  }
  const p = k.pending;
  if (!p || p.version !== doc.version) return;
  const what = p.motions.map(title).join(", ");
  ui.renderState.textContent = `Still rendering ${what}…`;
  const done = await busy(async () => {
    const urls = urlsOf(await resumeJob(p.job, (s) => { ui.renderState.textContent = renderStatus(what, s); }));
    gallery.show(p.motions, urls, p.format, p.size, title);
    keep({ pending: null, results: { version: p.version, motions: p.motions, format: p.format, size: p.size, urls } });
    return true;
  }, ui.renderError);
  if (!done) keep({ pending: null });
  ui.renderProgress.hidden = !done;
  ui.renderState.textContent = done ? `Rendered version ${doc.version}` : "";
  if (done) ui.results.hidden = false;
}

/** Resolves once every image and video under `root` has its size (or after `seconds`). */
function mediaShown(root, seconds) {
  const loading = [...root.querySelectorAll("img, video")].filter((m) =>
    m.tagName === "IMG" ? !m.complete : m.readyState < 1);
  const each = loading.map((m) => new Promise((resolve) => {
    for (const ev of ["load", "loadedmetadata", "error"]) m.addEventListener(ev, resolve, { once: true });
  }));
  return Promise.race([Promise.all(each), new Promise((resolve) => setTimeout(resolve, seconds * 1000))]);
}

/** The chosen motions, said beside Render (they may be scrolled out of the picker's box). */
function showChosen() {
  const chosen = picker.selected().map((n) => picker.title(n));
  ui.chosen.textContent = chosen.length ? `Chosen: ${chosen.join(", ")}` : "Tick at least one motion to render.";
}

// --- a motion from a video (POST /motions: a job, polled) ------------------------------------------

/** The person's own motions come first in the picker, under "Your motions". */
const OWN = "yours";

async function motionFromVideo(file) {
  if (!file) return;
  showError(null);
  const say = (text) => { ui.videoState.textContent = text; };
  const made = await busy(async () => {
    try {
      say("Uploading the video…");
      // the part of the video to use (seconds): empty fields leave it to the server (its first 20 s)
      const window = {};
      if (ui.videoStart.value.trim()) window.start = ui.videoStart.value.trim();
      if (ui.videoEnd.value.trim()) window.end = ui.videoEnd.value.trim();
      const job = await upload("motions", file, (f) =>
        say(f === null ? "Waiting for a worker…" : `Uploading the video ${Math.round(f * 100)} %`), window, "video");
      const done = await followJob(job.id, say);
      if (done.status !== "succeeded") {
        const e = done.error || {};
        throw new ApiError(e.status || 500, e.code || "failed", e.message || "the motion could not be made");
      }
      return done.motion;
    } catch (err) {
      say(`No motion was made from ${file.name || "the video"}.`); // the reason is right below
      throw err;
    } finally {
      ui.video.value = "";
      ui.videoCamera.value = "";
    }
  }, ui.videoError);
  if (!made) return;
  const own = { name: made.name, category: OWN, title: `Your video (${made.seconds.toFixed(1)} s)`,
    description: `${made.frames} frames at ${made.fps} fps; kept until ${made.expires.replace("T", " ").replace("Z", " UTC")}` };
  state.motions = [own, ...state.motions.filter((m) => m.name !== own.name)];
  const mine = state.categories.find((c) => c.name === OWN);
  if (mine) mine.motions = [own.name, ...mine.motions.filter((n) => n !== own.name)];
  else state.categories = [{ name: OWN, motions: [own.name] }, ...state.categories];
  picker.show(state.motions, [own.name, ...picker.selected().filter((n) => n !== own.name)], state.categories);
  const used = made.window?.note ? ` from ${made.window.note}` : "";
  say(`Made "${own.title}"${used}: it is selected below. Render to see the drawing move like the video.`);
  if (state.doc) startPreviews(state.doc);
}

/** Poll the job until it ends, saying how far the pose model has read. */
async function followJob(id, say) {
  for (;;) {
    const job = await call("GET", `jobs/${encodeURIComponent(id)}`);
    if (job.status === "succeeded" || job.status === "failed") return job;
    const p = job.progress || {};
    say(p.frames_total ? `Finding the person: frame ${p.frames_done} of ${p.frames_total}` : "Waiting for a worker…");
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

// --- wiring ------------------------------------------------------------------------------------

function refreshButtons() {
  const hasEdits = Object.keys(editor.edits()).length > 0;
  ui.save.disabled = state.busy || !state.doc || !hasEdits;
  ui.undo.disabled = state.busy || !editor.canUndo();
  ui.revert.disabled = state.busy || !hasEdits;
  ui.render.disabled = state.busy || !state.doc || state.doc.draft;
  ui.remove.disabled = state.busy || !state.doc || state.doc.draft;
  ui.upload.disabled = state.busy;
  ui.camera.disabled = state.busy;
  ui.manual.disabled = state.busy;
  ui.video.disabled = state.busy;
  ui.videoCamera.disabled = state.busy;
}

function wire() {
  ui.token.value = getToken();
  ui.token.addEventListener("change", () => {
    setToken(ui.token.value);
    showError(null);
    if (!state.motions.length) loadMotions();
  });
  ui.upload.addEventListener("change", () => createFrom(ui.upload.files[0]));
  // A picture dropped anywhere on the page is uploaded like a chosen one.
  document.addEventListener("dragover", (e) => {
    if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
  });
  document.addEventListener("drop", (e) => {
    const file = e.dataTransfer?.files[0];
    if (!file) return;
    e.preventDefault();
    createFrom(file);
  });
  ui.camera.addEventListener("change", () => createFrom(ui.camera.files[0]));
  ui.video.addEventListener("change", () => motionFromVideo(ui.video.files[0]));
  ui.videoCamera.addEventListener("change", () => motionFromVideo(ui.videoCamera.files[0]));
  ui.manual.addEventListener("change", () => openDraft(ui.manual.files[0]));
  for (const button of document.querySelectorAll("[data-tool]")) {
    button.addEventListener("click", () => {
      editor.setTool(button.dataset.tool);
      for (const b of document.querySelectorAll("[data-tool]")) b.setAttribute("aria-pressed", String(b === button));
    });
  }
  ui.brushSize.addEventListener("input", () => editor.setBrush(Number(ui.brushSize.value)));
  editor.setBrush(Number(ui.brushSize.value));
  ui.showMask.addEventListener("change", () => editor.setShowMask(ui.showMask.checked));
  ui.whole.addEventListener("change", () => editor.setWholePhoto(ui.whole.checked));
  ui.undo.addEventListener("click", () => editor.undo());
  ui.revert.addEventListener("click", () => editor.revert(state.mask));
  ui.save.addEventListener("click", save);
  ui.remove.addEventListener("click", removeCharacter);
  ui.render.addEventListener("click", render);
  ui.motions.addEventListener("change", () => {
    showChosen();
    keep({ chosen: picker.selected() });
  });
  window.addEventListener("beforeunload", (e) => {
    if (Object.keys(editor.edits()).length) e.preventDefault();
  });
  document.addEventListener("keydown", shortcut);
}

/** Ctrl/Cmd+S saves; with the drawing focused, M / B / E pick a tool and [ / ] resize the brush. */
function shortcut(e) {
  if (ui.fix.hidden) return;
  if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s") {
    e.preventDefault();
    if (!ui.save.disabled) save();
    return;
  }
  if (document.activeElement !== ui.stage || e.ctrlKey || e.metaKey || e.altKey) return;
  const tools = { m: "move", b: "brush", e: "eraser" };
  if (tools[e.key]) {
    document.querySelector(`[data-tool="${tools[e.key]}"]`).click();
    ui.stage.focus();
  } else if (e.key === "[" || e.key === "]") {
    ui.brushSize.value = Number(ui.brushSize.value) + (e.key === "]" ? 2 : -2);
    editor.setBrush(Number(ui.brushSize.value));
  }
}

// --- the model server's state (GET /ping's "models") ------------------------------------------------

const MODELS_WORDS = {
  preparing: "The models that find drawings are still being installed on this server.",
  starting: "The model server is starting and loading its models.",
  absent: "This server has no model server answering, so the page cannot find the drawing for you.",
};

/** Say, above the upload, when the models cannot help yet (and how far their preparation is), and
 * lead to placing the box and joints by hand; look again until they are ready. */
async function watchModels() {
  const models = await modelsState();
  const note = ui.modelsNote;
  note.hidden = models.state === "ready";
  if (models.state !== "ready") {
    const p = models.progress;
    const bar = note.querySelector("progress");
    bar.hidden = !(p && p.total > 0);
    if (!bar.hidden) bar.value = Math.min(1, p.done / p.total);
    const steps = p && p.total > 0 ? ` (${p.step}: ${p.done} of ${p.total})` : "";
    const meanwhile = models.served_by === "ink_finder_in_app"
      ? "Meanwhile the app's own ink finder reads photos (check the box and joints it finds), or you can place the box and joints yourself."
      : "Meanwhile you can place the box and joints yourself.";
    note.querySelector("p").textContent = `${models.detail || MODELS_WORDS[models.state] || MODELS_WORDS.starting}${steps} ${meanwhile}`;
    const wait = Math.min(30, Math.max(2, Number(models.retry_after_s) || 5));
    setTimeout(watchModels, wait * 1000);
  }
  note.dataset.state = models.state;
}

async function start() {
  wire();
  refreshButtons();
  watchModels();
  const motionsLoaded = loadMotions();
  const id = new URLSearchParams(location.hash.slice(1)).get("character");
  if (id) {
    await motionsLoaded;
    await busy(async () => {
      progress("Loading the character…", null);
      try {
        await open(await call("GET", `characters/${encodeURIComponent(id)}`));
      } finally {
        progress(null);
      }
    });
    if (state.doc?.id === id) restore(state.doc); // follows a render in progress: not awaited
  }
  document.body.dataset.ready = "true";
}

start();

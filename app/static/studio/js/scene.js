// Every character of one photo, together: the scene view (POST /scenes, PATCH /scenes/{id},
// POST /scenes/{id}/animations). The page shows the photo with each character's box numbered; per
// character a motion, "Fix" (the character editor above, as for one character) and "Drop"; "Add one"
// draws a box the detector missed; the background is the paper (drawings taken out), a colour, a
// picture or nothing; "Play the scene" renders it (a job with progress where the server has one).

import { call, describe, request, upload } from "./api.js";
import { renderJob } from "./jobs.js";

const SVG = "http://www.w3.org/2000/svg";

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

/**
 * Build the scene view inside `section` (an empty, hidden <section>). `onFix(characterId)` opens a
 * character in the page's editor. Returns {offer(file), open(sceneDoc)}: `offer` shows the button
 * that makes a scene of every character in the photo `file`.
 */
export function mountScene(section, { onFix = null, onOpen = null } = {}) {
  const state = { file: null, scene: null, motions: [], drawing: null, busy: false };
  const h2 = el("h2", { id: "h-scene" }, el("span", { className: "step", text: "★" }), " Every character together");
  const hint = el("p", { className: "hint", text: "Several figures on the page? Animate them all where they were drawn." });
  const create = el("button", { type: "button", className: "primary", testid: "scene-create",
    text: "Animate every character in this photo" });
  const status = el("p", { className: "hint", role: "status", "aria-live": "polite", testid: "scene-status" });
  const error = el("div", { role: "alert", className: "scene-error", testid: "scene-error", hidden: true });
  const img = el("img", { alt: "The photo", className: "scene-photo" });
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("preserveAspectRatio", "none");
  const stage = el("div", { className: "scene-stage", testid: "scene-stage", hidden: true }, img, svg);
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
  const result = el("img", { alt: "The scene, every character moving", className: "scene-result",
    testid: "scene-result", hidden: true });
  const editing = el("div", { className: "scene-edit", hidden: true },
    el("div", { className: "scene-layout" }, stage,
      el("div", { className: "scene-controls" }, list, el("div", { className: "row" }, add), background,
        el("div", { className: "row" }, play, bar))),
    result);
  section.append(h2, hint, el("div", { className: "row" }, create), error, status, editing);

  function say(text) {
    status.textContent = text || "";
  }

  function fail(err) {
    error.hidden = !err;
    error.textContent = err ? describe(err) : "";
  }

  async function guarded(work) {
    if (state.busy) return;
    state.busy = true;
    fail(null);
    for (const b of [create, add, play]) b.disabled = true;
    try {
      await work();
    } catch (err) {
      fail(err);
    } finally {
      state.busy = false;
      for (const b of [create, add, play]) b.disabled = false;
    }
  }

  async function loadMotions() {
    if (state.motions.length) return;
    const lib = await call("GET", "motions");
    state.motions = lib.motions.map((m) => ({ name: m.name, title: m.title || m.name }));
  }

  function draw() {
    const doc = state.scene;
    const { width, height } = doc.image;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.replaceChildren();
    doc.characters.forEach((c, i) => {
      if (!c.bbox) return;
      const [l, t, r, b] = c.bbox;
      const rect = document.createElementNS(SVG, "rect");
      Object.entries({ x: l, y: t, width: r - l, height: b - t, class: "scene-box" })
        .forEach(([k, v]) => rect.setAttribute(k, v));
      const label = document.createElementNS(SVG, "text");
      Object.entries({ x: l + 6, y: t + Math.max(18, height / 30), class: "scene-label" })
        .forEach(([k, v]) => label.setAttribute(k, v));
      label.style.fontSize = `${Math.max(16, height / 24)}px`;
      label.textContent = String(i + 1);
      svg.append(rect, label);
    });
    if (state.drawing?.rect) svg.append(state.drawing.rect);
    list.replaceChildren(...doc.characters.map((c, i) => row(c, i)));
    const kind = doc.background.kind;
    section.querySelectorAll(`input[name="${bgName}"]`).forEach((input) => { input.checked = input.value === kind; });
    if (kind === "colour") colour.value = doc.background.colour;
  }

  function row(c, i) {
    const select = el("select", { testid: `scene-motion-${i}`, "aria-label": `Motion of character ${i + 1}` });
    for (const m of state.motions) select.append(el("option", { value: m.name, text: m.title }));
    select.value = c.motion;
    select.addEventListener("change", () => guarded(() => patch({ characters: [{ id: c.id, motion: select.value }] })));
    const fix = el("button", { type: "button", testid: `scene-fix-${i}`, text: "Fix" });
    fix.addEventListener("click", () => onFix && onFix(c.id));
    fix.hidden = !onFix;
    const drop = el("button", { type: "button", className: "quiet", testid: `scene-drop-${i}`, text: "Drop" });
    drop.disabled = state.scene.characters.length < 2;
    drop.addEventListener("click", () => guarded(() => patch({ characters: [{ id: c.id, drop: true }] })));
    return el("li", { testid: `scene-character-${i}` }, el("span", { className: "scene-number", text: String(i + 1) }),
      select, fix, drop, c.missing ? el("span", { className: "hint", text: " (gone: drop it)" }) : "");
  }

  async function patch(body, form = null) {
    const answer = form ? await request("PATCH", `scenes/${state.scene.id}`, { form })
      : await request("PATCH", `scenes/${state.scene.id}`, { json: body });
    state.scene = answer.body;
    result.hidden = true;
    draw();
    say("Saved. Play the scene to see it move.");
  }

  async function open(doc) {
    await loadMotions();
    state.scene = doc;
    img.src = doc.urls.page;
    create.hidden = true;
    stage.hidden = false;
    editing.hidden = false;
    section.hidden = false;
    draw();
    if (onOpen) onOpen(doc);
    const n = doc.characters.length;
    const skipped = (doc.skipped || []).length;
    say(`${n} character${n === 1 ? "" : "s"} on the page${skipped ? ` (${skipped} more box${skipped === 1 ? "" : "es"} left out)` : ""}.`);
  }

  const makeScene = () => guarded(async () => {
    if (!state.file) return;
    say("Uploading…");
    const doc = await upload("scenes", state.file, (f) =>
      say(f === null ? "Finding every character, its mask and joints…" : `Uploading ${Math.round(f * 100)} %`));
    await open(doc);
    editing.scrollIntoView({ block: "start" });
  });
  create.addEventListener("click", makeScene);

  // "Add one": drag a box on the photo; the character is made from the same photo with that box.
  add.addEventListener("click", () => {
    if (!state.scene || !state.file) return;
    state.drawing = { start: null, rect: null };
    stage.classList.add("drawing");
    say("Drag a box around the drawing that is missing.");
  });
  function imagePoint(e) {
    const box = svg.getBoundingClientRect();
    const { width, height } = state.scene.image;
    return [(e.clientX - box.left) / box.width * width, (e.clientY - box.top) / box.height * height];
  }
  svg.addEventListener("pointerdown", (e) => {
    if (!state.drawing) return;
    e.preventDefault();
    svg.setPointerCapture(e.pointerId);
    state.drawing.start = imagePoint(e);
    state.drawing.rect = document.createElementNS(SVG, "rect");
    state.drawing.rect.setAttribute("class", "scene-box new");
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
    const box = [Math.min(x, x0), Math.min(y, y0), Math.max(x, x0), Math.max(y, y0)].map((v) => Math.round(v));
    if (box[2] - box[0] < 8 || box[3] - box[1] < 8) {
      draw();
      say("That box is too small: press Add and drag around the drawing.");
      return;
    }
    guarded(async () => {
      say("Cutting out the new character…");
      const doc = await upload("characters", state.file, () => {}, { bbox: JSON.stringify(box) });
      await patch({ add: [{ id: doc.id }] });
    });
  });

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
      guarded(() => patch(null, form));
      picture.value = "";
    }
  });

  play.addEventListener("click", () => guarded(async () => {
    state.scene = await call("GET", `scenes/${state.scene.id}`); // a character fixed meanwhile: its new box
    draw();
    bar.hidden = false;
    bar.removeAttribute("value");
    const answer = await renderJob(`scenes/${state.scene.id}/animations`, { format: "gif" }, (s) => {
      if (s.stage === "waiting") say(`The server is busy; trying again in ${s.retryIn} s…`);
      else if (s.framesTotal) {
        bar.value = s.framesDone / s.framesTotal;
        say(`Drawing frame ${s.framesDone} of ${s.framesTotal}…`);
      } else say(s.stage === "queued" ? "Waiting for a free renderer…" : "Rendering…");
    });
    bar.hidden = true;
    result.src = answer.animation;
    result.hidden = false;
    say("Every character is moving.");
    result.scrollIntoView({ block: "nearest" });
  }));

  return {
    /** A photo was uploaded: offer to animate every character in it. */
    offer(file) {
      state.file = file;
      section.hidden = false;
      create.hidden = false;
    },
    open,
    /** Make the scene of the offered photo now (the scenes page does at once). */
    create: makeScene,
    fail,
  };
}

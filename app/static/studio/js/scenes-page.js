// The scenes page (GET /studio-scenes, studio/scenes.html): a photo of a drawn scene in, every character moving on it out.
// The scene view itself is js/scene.js; "Fix" opens a character in the studio's editor
// (studio#character=<id>, same tab: the token stays), and the browser's Back returns here
// (#scene=<id> reopens the scene).

import { call, getToken, setToken } from "./api.js";
import { mountScene } from "./scene.js";

const $ = (id) => document.getElementById(id);
const section = $("step-scene");

const view = mountScene(section, {
  onFix: (id) => { location.href = `studio#character=${encodeURIComponent(id)}`; },
  onOpen: (doc) => history.replaceState(null, "", `#scene=${encodeURIComponent(doc.id)}`),
});

function chosen(input) {
  const file = input.files[0];
  input.value = "";
  if (!file) return;
  view.offer(file);
  view.create();
}

async function start() {
  $("token").value = getToken();
  $("token").addEventListener("change", () => setToken($("token").value));
  for (const input of [$("upload"), $("camera")]) input.addEventListener("change", () => chosen(input));
  const id = new URLSearchParams(location.hash.slice(1)).get("scene");
  if (id) {
    try {
      await view.open(await call("GET", `scenes/${encodeURIComponent(id)}`));
    } catch (err) {
      view.fail(err);
      section.hidden = false;
    }
  }
  document.body.dataset.ready = "true";
}

start();

// The scenes page (GET /studio-scenes, app/templates/scenes.html): a photo of a drawn scene in, every character moving on it out.
// The scene view itself is js/scene.js; "Fix" opens a character in the studio's editor
// (studio#character=<id>, same tab: the token stays), and the browser's Back returns here
// (#scene=<id> reopens the scene); #from=<character id> starts from that character's photo; #photo: a photo
// in which the models found nothing, kept in this browser until its first character makes the scene.

import { call, getToken, sameOrigin, setToken } from "./api.js";
import { forgetPhoto, keepPhoto, keptPhoto } from "./kept-photo.js";
import { mountScene } from "./scene.js";

const $ = (id) => document.getElementById(id);
const section = $("step-scene");

const view = mountScene(section, {
  onFix: (id) => { location.href = `studio#character=${encodeURIComponent(id)}`; },
  onOpen: (doc) => {
    history.replaceState(null, "", `#scene=${encodeURIComponent(doc.id)}`);
    forgetPhoto();
  },
  onPhoto: async (file) => {
    if (await keepPhoto(file)) history.replaceState(null, "", "#photo");
  },
});

/** #photo after a reload: the photo kept before its first character, or words saying to choose it again. */
async function reopenPhoto() {
  const file = await keptPhoto();
  if (file) {
    await view.reopen(file);
    return;
  }
  history.replaceState(null, "", location.pathname);
  section.hidden = false;
  view.fail("The photo chosen before the page was reloaded was not kept in this browser: choose it again.");
}

function chosen(input) {
  const file = input.files[0];
  input.value = "";
  if (!file) return;
  view.offer(file);
  view.create();
}

/** `#from=<character id>` (the studio's link when its photo holds several drawings): that photo, every
 * character in it. */
async function fromCharacter(cid) {
  try {
    const doc = await call("GET", `characters/${encodeURIComponent(cid)}`);
    const url = doc.urls.image;
    const response = await fetch(url, { headers: sameOrigin(url) && getToken() ? { Authorization: `Bearer ${getToken()}` } : {} });
    if (!response.ok) throw new Error(`the photo could not be fetched (${response.status})`);
    const blob = await response.blob();
    view.offer(new File([blob], "photo.png", { type: blob.type || "image/png" }));
    await view.create();
  } catch (err) {
    section.hidden = false;
    view.fail(err);
  }
}

async function start() {
  $("token").value = getToken();
  $("token").addEventListener("change", () => setToken($("token").value));
  for (const input of [$("upload"), $("camera")]) input.addEventListener("change", () => chosen(input));
  const hash = new URLSearchParams(location.hash.slice(1));
  const id = hash.get("scene");
  const from = hash.get("from");
  if (from && !id) await fromCharacter(from);
  else if (hash.has("photo") && !id) await reopenPhoto();
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

// Back from the studio's editor ("Fix"): a page restored from the browser's cache shows the scene as it
// was before the fix (the old box); read it again.
window.addEventListener("pageshow", (e) => {
  if (e.persisted) view.refresh().catch((err) => view.fail(err));
});

start();

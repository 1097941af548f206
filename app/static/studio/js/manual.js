// The editor's starting point when the models cannot help (tiny random models, no model server, or a
// drawing they miss): the whole photo, opened in the browser without asking the server anything, a
// box (the photo's ink when that looks like one drawing, else none: the person draws it) and a
// standing figure's joints inside the box. The person drags them into place; Save creates the
// character with them and the server skips detection and pose.

// The 16 joints of the photo skeleton as fractions of the box (x right, y down). "right" is the
// figure's own right, on the image's left, as the pose model and docs/api.md use it.
const TEMPLATE = {
  root: [0.5, 0.6], hip: [0.5, 0.6], torso: [0.5, 0.36], neck: [0.5, 0.18],
  right_shoulder: [0.34, 0.38], right_elbow: [0.2, 0.46], right_hand: [0.08, 0.52],
  left_shoulder: [0.66, 0.38], left_elbow: [0.8, 0.46], left_hand: [0.92, 0.52],
  right_hip: [0.39, 0.63], right_knee: [0.34, 0.78], right_foot: [0.3, 0.93],
  left_hip: [0.61, 0.63], left_knee: [0.66, 0.78], left_foot: [0.7, 0.93],
};
// Each joint's parent (the document's skeleton rows, parents first), for the bones drawn.
const PARENTS = {
  root: null, hip: "root", torso: "hip", neck: "torso",
  right_shoulder: "torso", right_elbow: "right_shoulder", right_hand: "right_elbow",
  left_shoulder: "torso", left_elbow: "left_shoulder", left_hand: "left_elbow",
  right_hip: "root", right_knee: "right_hip", right_foot: "right_knee",
  left_hip: "root", left_knee: "left_hip", left_foot: "left_knee",
};
export const SKELETON = Object.entries(PARENTS).map(([name, parent]) => ({ name, parent }));
const SAMPLE_SIDE = 256; // the photo is measured at this size (px): enough for a box
const INK_BELOW_PAPER = 60; // a pixel this much darker than the paper (0-255 luminance) is ink
const MAX_GUESS_AREA = 0.5; // an ink box over half the photo is the table or a shadow, not a drawing

/** A standing figure's joints {name: [x, y]} inside `bbox` [l, t, r, b] (image pixels). */
export function skeletonIn([l, t, r, b]) {
  return Object.fromEntries(Object.entries(TEMPLATE).map(([name, [fx, fy]]) =>
    [name, [round1(l + fx * (r - l)), round1(t + fy * (b - t))]]));
}

/**
 * A draft character of `file` (an image File) for the editor: {doc, photo}. `doc` has the
 * document's fields the editor reads (image size after EXIF orientation, bbox or null, joints,
 * skeleton) and `draft: true`; `photo` is the decoded photo. Nothing is sent anywhere.
 */
export async function draftFrom(file) {
  const photo = await createImageBitmap(file); // applies the EXIF orientation, like the server
  const { width, height } = photo;
  let bbox = inkBox(photo);
  if (bbox && (bbox[2] - bbox[0]) * (bbox[3] - bbox[1]) > MAX_GUESS_AREA * width * height) bbox = null;
  bbox = bbox && bbox.map(round1);
  const doc = {
    draft: true, id: null, version: 0, image: { width, height }, bbox,
    joints: bbox ? skeletonIn(bbox) : {}, skeleton: SKELETON, detections: [], urls: {},
  };
  return { doc, photo };
}

/** The box [l, t, r, b] of the ink (pixels well darker than the paper), or null if there is none. */
function inkBox(bitmap) {
  const k = Math.min(1, SAMPLE_SIDE / Math.max(bitmap.width, bitmap.height));
  const w = Math.max(1, Math.round(bitmap.width * k));
  const h = Math.max(1, Math.round(bitmap.height * k));
  const canvas = new OffscreenCanvas(w, h);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.fillStyle = "#fff"; // transparent pixels count as paper
  ctx.fillRect(0, 0, w, h);
  ctx.drawImage(bitmap, 0, 0, w, h);
  const px = ctx.getImageData(0, 0, w, h).data;
  const luma = new Float32Array(w * h);
  for (let i = 0; i < luma.length; i++) luma[i] = 0.299 * px[4 * i] + 0.587 * px[4 * i + 1] + 0.114 * px[4 * i + 2];
  const paper = percentile(luma, 0.75); // most of a photo of a drawing is paper
  const xs = [];
  const ys = [];
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (luma[y * w + x] < paper - INK_BELOW_PAPER) {
        xs.push(x);
        ys.push(y);
      }
    }
  }
  if (xs.length < 20) return null;
  // Stray marks (a shadow at the edge, a speck) should not stretch the box: trim 1% each side.
  const pad = 2; // sample px: the stroke's own width
  const l = Math.max(0, percentile(xs, 0.01) - pad);
  const t = Math.max(0, percentile(ys, 0.01) - pad);
  const r = Math.min(w, percentile(xs, 0.99) + 1 + pad);
  const b = Math.min(h, percentile(ys, 0.99) + 1 + pad);
  if (r - l < 4 || b - t < 4) return null;
  return [l / k, t / k, r / k, b / k].map((v, i) => Math.min(v, i % 2 ? bitmap.height : bitmap.width));
}

function percentile(values, q) {
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function round1(v) {
  return Math.round(v * 10) / 10;
}

// Reading the character document of the API (docs/api.md, "Characters"): one place knows its fields.
//
// Coordinates: "image" pixels are the uploaded photo after EXIF orientation (x right, y down), the
// frame of `bbox` and `joints`; "grid" pixels are the texture/mask grid (the crop the app worked on).

/** The mask grid of `doc` (the texture's pixels) and its map to image pixels: image = offset + grid * scale. */
export function maskGrid(doc) {
  const t = doc.texture;
  if (!t || !(t.width > 0 && t.height > 0)) return null;
  return { width: t.width, height: t.height, perPixel: Number(t.scale), offsetX: Number(t.offset[0]), offsetY: Number(t.offset[1]) };
}

/** The image's size in image pixels (the photo shown may be a downsized copy of it). */
export function imageSize(doc) {
  return { width: doc.image.width, height: doc.image.height };
}

/** grid pixel (u, v) -> image pixel [x, y]. */
export function gridToImage(grid, u, v) {
  return [u * grid.perPixel + grid.offsetX, v * grid.perPixel + grid.offsetY];
}

/** image pixel (x, y) -> grid pixel [u, v]. */
export function imageToGrid(grid, x, y) {
  return [(x - grid.offsetX) / grid.perPixel, (y - grid.offsetY) / grid.perPixel];
}

/** [{name, parent}] of the skeleton, parents first (the document's own order). */
export function bones(doc) {
  if (Array.isArray(doc.skeleton) && doc.skeleton.length) {
    return doc.skeleton.map((j) => ({ name: j.name, parent: j.parent ?? null }));
  }
  return Object.keys(doc.joints || {}).map((name) => ({ name, parent: null }));
}

/** A deep copy of the joints: {name: [x, y]} in image pixels. */
export function copyJoints(joints) {
  return Object.fromEntries(Object.entries(joints || {}).map(([k, [x, y]]) => [k, [x, y]]));
}

export function sameJoints(a, b) {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length &&
    keys.every((k) => b[k] && near(a[k][0], b[k][0]) && near(a[k][1], b[k][1]));
}

export function sameBox(a, b) {
  return a.length === b.length && a.every((v, i) => near(v, b[i]));
}

function near(a, b) {
  return Math.abs(a - b) < 0.05;
}

/** The version the API's If-Match expects for `doc` (its ETag). */
export function etagOf(doc) {
  return `"${doc.version}"`;
}

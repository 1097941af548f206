// The HTTP API as the page uses it: the bearer token, JSON calls, the upload with progress, and
// errors turned into sentences a person can act on. Paths are relative, so the page works behind a
// proxy that mounts the app under a prefix.

const TOKEN_KEY = "doodlepod.token";

export class ApiError extends Error {
  constructor(status, code, message, { requestId = "", retryAfter = "", warnings = [], fits = null } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
    this.warnings = warnings; // [{code, message}]: e.g. "tiny_models"
    this.fits = fits; // output_too_large: {size, max_frames} that fit (app/render/sheet_price.py)
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  const token = value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function authHeaders() {
  const token = getToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** True when `url` is served by this app (so it may carry the token). */
export function sameOrigin(url) {
  return new URL(url, location.href).origin === location.origin;
}

/** fetch() -> parsed JSON (null for 204), or an ApiError. */
export async function call(method, path, options = {}) {
  return (await request(method, path, options)).body;
}

/**
 * fetch() -> {status, headers, body} (body: parsed JSON, null for 204), or an ApiError. `headers`
 * adds request headers (e.g. Prefer); `priority` is fetch()'s hint ("low" for background work).
 */
export async function request(method, path, { json, form, ifMatch, signal, headers: extra = {}, priority } = {}) {
  const headers = { Accept: "application/json", ...authHeaders(), ...extra };
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form;
  }
  if (ifMatch) headers["If-Match"] = ifMatch;
  let response;
  try {
    response = await fetch(path, { method, headers, body, signal, ...(priority ? { priority } : {}) });
  } catch (err) {
    if (err?.name === "AbortError") throw new ApiError(0, "aborted", "the page no longer needs this answer");
    throw new ApiError(0, "network", "network error");
  }
  if (!response.ok) throw await errorFrom(response.status, () => response.json(), response.headers);
  if (response.status === 204) return { status: 204, headers: response.headers, body: null };
  try {
    return { status: response.status, headers: response.headers, body: await response.json() };
  } catch (err) {
    // aborted while the body was still coming: the page no longer needs it, the answer was fine
    if (err?.name === "AbortError" || signal?.aborted) throw new ApiError(0, "aborted", "the page no longer needs this answer");
    throw new ApiError(response.status, "bad_answer", "the server's answer is not JSON");
  }
}

/** Seconds an error's Retry-After asks for (a number of seconds or an HTTP date), or `fallback`. */
export function retrySeconds(err, fallback = 2) {
  const value = err?.retryAfter;
  if (!value) return fallback;
  const seconds = /^\d+$/.test(value.trim()) ? Number(value) : (Date.parse(value) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(120, Math.max(0.2, seconds)) : fallback;
}

/** Resolves after `seconds`, or at once (rejecting with an "aborted" ApiError) when `signal` aborts. */
export function sleep(seconds, signal) {
  return new Promise((resolve, reject) => {
    const aborted = () => reject(new ApiError(0, "aborted", "the page no longer needs this answer"));
    if (signal?.aborted) return aborted();
    const timer = setTimeout(resolve, seconds * 1000);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      aborted();
    }, { once: true });
  });
}

async function errorFrom(status, readJson, headers) {
  let body = null;
  try {
    body = await readJson();
  } catch {
    // a proxy's HTML error page, or nothing: keep the status alone
  }
  const code = typeof body?.error === "string" ? body.error : `http_${status}`;
  const message = typeof body?.message === "string" ? body.message : "";
  return new ApiError(status, code, message, {
    requestId: headers.get("X-Request-ID") || "", retryAfter: headers.get("Retry-After") || "",
    warnings: Array.isArray(body?.warnings) ? body.warnings : [],
    fits: body?.fits && typeof body.fits === "object" ? body.fits : null,
  });
}

/**
 * POST a photo as multipart `image` (plus form `fields`) with XMLHttpRequest: fetch cannot report
 * upload progress. `onProgress(fraction)` gets 0..1 while the bytes go up, then `null` while the
 * models run.
 */
export function upload(path, file, onProgress, fields = {}, field = "image") {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.setRequestHeader("Accept", "application/json");
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.upload.onload = () => onProgress(null);
    xhr.onerror = () => reject(new ApiError(0, "network", "network error"));
    xhr.onload = async () => {
      const headers = { get: (name) => xhr.getResponseHeader(name) };
      if (xhr.status < 200 || xhr.status >= 300) {
        reject(await errorFrom(xhr.status, () => JSON.parse(xhr.responseText), headers));
        return;
      }
      try {
        resolve(JSON.parse(xhr.responseText));
      } catch {
        reject(new ApiError(xhr.status, "bad_answer", "the server's answer is not JSON"));
      }
    };
    const form = new FormData();
    form.append(field, file, file.name || field);
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    xhr.send(form);
  });
}

/**
 * The model server's state for a person: GET /ping's `models` ({state, detail, progress,
 * retry_after_s}; state "ready" | "preparing" | "starting" | "absent"). A server whose /ping has
 * no `models` yet is read from its detector and pose components. Never throws: a /ping that cannot
 * be read says nothing ("ready").
 */
export async function modelsState() {
  let ping;
  try {
    const response = await fetch("ping", { headers: { Accept: "application/json" }, cache: "no-store" });
    ping = await response.json();
  } catch {
    return { state: "ready" };
  }
  if (ping?.models?.state) return ping.models;
  const parts = [ping?.components?.detector, ping?.components?.pose_estimator].filter(Boolean);
  if (!parts.length || parts.every((p) => p.ok)) return { state: "ready" };
  const unreachable = parts.some((p) => /unreachable|connect/i.test(p.detail || ""));
  return unreachable
    ? { state: "absent", detail: "The model server does not answer, so the page cannot find the drawing for you.", retry_after_s: 10 }
    : { state: "starting", detail: "The model server is starting and loading its models.", retry_after_s: 5 };
}

/** Fetch an image the page needs pixels of; the token goes only to this app, never to S3. */
export async function fetchBitmap(url) {
  const headers = sameOrigin(url) ? authHeaders() : {};
  let response;
  try {
    response = await fetch(url, { headers, mode: "cors" });
  } catch {
    throw new ApiError(0, "image_blocked", "the image could not be fetched");
  }
  if (!response.ok) throw await errorFrom(response.status, () => response.json(), response.headers);
  return createImageBitmap(await response.blob());
}

// What a person should read for each error code (the server's own message is added after it).
const WORDS = {
  network: "Cannot reach the server. Check the connection and try again.",
  unauthorized: "This server needs an API token: paste it in the “API token” field at the top.",
  too_large: "That photo is too large.",
  unsupported_type: "That file is not a photo the server reads.", // the server's message lists the types
  unreadable_image: "That file could not be read as a picture (is it damaged or empty?).",
  no_character: "No drawing was found in the photo. Try a photo of one figure on plain paper, " +
    "filling most of the frame, in good light.",
  no_skeleton: "The drawing was found but not its pose. Try a figure with arms and legs apart.",
  invalid_character: "This character cannot be animated as it is.",
  unknown_motion: "That motion is not on this server any more; reload the page.",
  not_found: "This character no longer exists (characters expire after a while). Upload the photo again.",
  version_mismatch: "This character was changed somewhere else meanwhile. Reload the page to see the new version.",
  edit_conflict: "This character is being changed somewhere else right now. Try again.",
  bad_mask: "The painted mask could not be read by the server.",
  mask_wrong_size: "The painted mask does not fit this character any more. Reload the page.",
  joints_outside_image: "A joint is outside the photo. Drag it back onto the drawing.",
  bbox_outside_image: "The box is empty or outside the photo. Drag its corners around the drawing.",
  overloaded: "The server is busy right now.",
  model_server_unavailable: "The model server is not ready yet. Try again in a minute.",
  models_unavailable: "The models that find the drawing are not ready yet.",
  model_server_error: "The model server answered with an error.",
  storage_error: "The server could not store the files.",
  low_disk_space: "The server is low on disk space.",
  deadline_exceeded: "That took too long and was stopped. Try again, or a smaller photo.",
  image_blocked: "The mask image could not be read from storage, so it cannot be painted here " +
    "(an S3 bucket needs a CORS rule allowing GET from this page).",
  bad_answer: "The server answered something the page does not understand.",
  internal_error: "The server hit an internal error.",
  bad_request: "The server could not take that request as it is.",
  scene_too_large: "That file would take too long to make.",
  too_many_characters: "A scene holds only so many characters.",
  rate_limited: "Too many requests from this browser in a short time.",
  render_share_used: "Your other render on this server is still running, and each person gets one at a time: " +
    "try again when it is done.",
  too_many_connections: "This browser has too many connections open to the server.",
  queue_full: "The server has too many renders waiting.",
  output_too_large: "That file would be too large to make: choose a smaller size (or, for a sprite sheet, PNG frames).",
  expired: "That file is no longer on the server (files are kept for 24 hours). Make it again.",
  download_failed: "The file could not be fetched from the server.",
};

// An error without a code the page knows: what its status means, in a person's words.
const BY_STATUS_WORDS = {
  400: "The server could not take that request as it is.",
  404: "That is no longer on the server (everything is kept for 24 hours).",
  409: "Something changed on the server meanwhile. Try again.",
  422: "The server cannot do that with this drawing.",
  429: "Too many requests in a short time.",
  503: "The server is busy right now.",
};

// Codes whose server message is for operators (it names a server setting): the page's words alone.
const OWN_WORDS_ONLY = new Set(["render_share_used", "too_many_connections"]);

/** A sentence (or two) for `err`, never raw JSON. */
export function describe(err) {
  if (!(err instanceof ApiError)) return `Something went wrong in the page: ${err?.message || err}`;
  // A proxy's own 401/413/412/504 page has no code: the status says enough.
  const byStatus = { 401: "unauthorized", 412: "version_mismatch", 413: "too_large", 504: "deadline_exceeded" };
  const code = WORDS[err.code] ? err.code : byStatus[err.status] || err.code;
  let text = WORDS[code] || BY_STATUS_WORDS[err.status] ||
    (err.status >= 500 ? "The server hit a problem." : "The server did not do that.");
  if (err.message && !WORDS[code]?.includes(err.message) && !OWN_WORDS_ONLY.has(code)) text += ` ${capitalise(err.message)}.`;
  // each thing once: the server's message may already say when to retry
  if (err.retryAfter && !/\bretry\b|\btry again\b/i.test(text)) text += ` Try again in ${err.retryAfter} s.`;
  return text.replace(/\.\.$/, ".");
}

/**
 * The page's words for a sprite sheet the server priced over its bound (422 `output_too_large` with
 * `fits`, app/render/sheet_price.py: the one owner of the rule): the largest of the page's `sizes` that
 * fits, or PNG frames. `what`: "Zombie Walk at 1024 px". Null for any other error.
 */
export function sheetTooBig(err, what, sizes) {
  if (!(err instanceof ApiError) || err.code !== "output_too_large" || !err.fits?.size) return null;
  const fits = sizes.filter((side) => side <= err.fits.size).pop();
  return `A sprite sheet of ${what} would not fit in one picture (it holds every frame). ` +
    (fits ? `Choose ${fits} px or smaller, ` : "Choose a smaller size, ") + "or “PNG frames (zip)”, which has no such limit.";
}

function capitalise(s) {
  const t = s.trim().replace(/\.$/, "");
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/** "Kept on this server until Tue 14:32 (24 hours after it was made)." for a document with
 * `created_at` and `expires_at`, or "" without them. */
export function keptUntil(doc) {
  const end = Date.parse(doc?.expires_at || "");
  const start = Date.parse(doc?.created_at || "");
  if (!Number.isFinite(end)) return "";
  const when = new Date(end).toLocaleString([], { weekday: "short", hour: "2-digit", minute: "2-digit" });
  const hours = Number.isFinite(start) ? Math.round((end - start) / 3600e3) : null;
  return `Kept on this server until ${when}${hours ? ` (${hours} hours after it was made)` : ""}; download what you want to keep.`;
}

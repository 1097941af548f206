// A render the person asked for, as the server can best take it: an async job (POST with
// "Prefer: respond-async", then GET jobs/{id} until it ends) whose progress the page shows; a
// synchronous request where the server has no job queue (no Redis: it answers jobs_unavailable).
// A 503 or 429 with Retry-After is waited out and tried again on its own, the wait shown; the
// person never has to press Render twice.

import { ApiError, request, retrySeconds, sleep } from "./api.js";

// How often the page reads the job while it runs (the worker writes its progress at most 5 times a
// second, so this is what a person sees move).
const POLL_S = 0.2;
// Most seconds of waiting out 503s and 429s before the page gives up and shows the error.
const MAX_WAIT_S = 300;
// Answers worth waiting out: every render slot taken, the job queue full, the client's rate, and this
// person's own other render still holding their one render slot (429 render_share_used: the pod gives
// each client one at a time; a preview or a render in another tab ends within seconds).
const RETRYABLE = new Set(["overloaded", "queue_full", "rate_limited", "render_share_used"]);

/**
 * What a person reads while the page waits out `code` before `doing` again in `seconds`: their own
 * other render (render_share_used), their pace (rate_limited), or a busy server.
 */
export function waitWords(code, seconds, doing = "trying again") {
  if (code === "render_share_used") {
    return `Your other render on this server is still running (each person gets one at a time): ${doing} in ${seconds} s`;
  }
  if (code === "rate_limited") return `Many requests from this browser just now: ${doing} in ${seconds} s`;
  return `The server is busy: ${doing} in ${seconds} s`;
}

/**
 * `call()`, and again after each Retry-After while the server answers one of the waits above, for at
 * most `maxWaitS` in all; `onWait(code, secondsLeft)` each second of a wait. Other errors, and a wait
 * past the bound, are the caller's.
 */
export async function waitingOut(call, onWait, { maxWaitS = MAX_WAIT_S, signal } = {}) {
  const started = performance.now();
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof ApiError) || !RETRYABLE.has(err.code)) throw err;
      const wait = retrySeconds(err);
      if ((performance.now() - started) / 1000 + wait > maxWaitS) throw err;
      await countdown(wait, (s) => onWait(err.code, s.retryIn), signal, err.code);
    }
  }
}

/**
 * POST `body` to `path` (a render) and resolve with the answer's JSON (the synchronous answer, or
 * the succeeded job, which holds the same "animations"). `onState` gets what to show:
 * {stage: "queued" | "running" | "waiting" | "rendering" | "storing", fraction?, framesDone?,
 * framesTotal?, secondsLeft?, retryIn?, reason? (a wait's code: see waitWords)}. Rejects with an ApiError (a failed job's error too).
 */
export async function renderJob(path, body, onState, { signal, sync: synchronous = false, onJob = null } = {}) {
  const started = performance.now();
  let sync = synchronous; // true: no job (e.g. a motion the server resolves on synchronous requests only)
  for (;;) {
    try {
      if (sync) {
        onState({ stage: "rendering" });
        return (await request("POST", path, { json: body, signal })).body;
      }
      onState({ stage: "queued" });
      const answer = await request("POST", path, { json: body, signal, headers: { Prefer: "respond-async" } });
      if (answer.status !== 202) return answer.body; // a server that answered at once
      if (onJob) onJob(answer.body.id); // e.g. kept, so a reloaded page follows the same job
      return await follow(answer.body.id, onState, signal);
    } catch (err) {
      if (err instanceof ApiError && err.code === "jobs_unavailable" && !sync) {
        sync = true; // no job queue on this server: the same request, answered when rendered
        continue;
      }
      if (!(err instanceof ApiError) || !RETRYABLE.has(err.code)) throw err;
      const wait = retrySeconds(err);
      if ((performance.now() - started) / 1000 + wait > MAX_WAIT_S) throw err;
      await countdown(wait, onState, signal, err.code);
    }
  }
}

/** Follow a render job that was already asked for (a reloaded page): as renderJob's answer. */
export function resumeJob(id, onState, { signal } = {}) {
  return follow(id, onState, signal);
}

/** Show the wait second by second (`reason`: the answer's code), then resolve. */
async function countdown(seconds, onState, signal, reason = "") {
  const end = performance.now() + seconds * 1000;
  for (let left = seconds; left > 0; left = (end - performance.now()) / 1000) {
    onState({ stage: "waiting", retryIn: Math.ceil(left), reason });
    await sleep(Math.min(1, left), signal);
  }
}

/** Poll the job until it ends; its progress goes to `onState`. */
async function follow(id, onState, signal) {
  const path = `jobs/${encodeURIComponent(id)}`;
  let rendering = null; // when the first frame was counted: the estimate's start
  for (;;) {
    const job = (await request("GET", path, { signal })).body;
    if (job.status === "succeeded") return job;
    if (job.status === "failed") {
      const e = job.error || {};
      throw new ApiError(e.status || 500, e.code || "internal_error", e.message || "the render failed");
    }
    const p = job.progress || {};
    const total = p.frames_total || 0;
    const done = Math.min(p.frames_done || 0, total);
    const fraction = fractionOf(p);
    if (fraction > 0 && rendering === null) rendering = { t: performance.now(), f: fraction };
    let secondsLeft = null;
    if (rendering && fraction > rendering.f) {
      const rate = (fraction - rendering.f) / (performance.now() - rendering.t);
      secondsLeft = Math.max(0, (1 - fraction) / rate / 1000);
    }
    onState({
      stage: job.status === "queued" ? "queued" : p.stage || "running",
      fraction, framesDone: done, framesTotal: total, secondsLeft,
    });
    await sleep(POLL_S, signal);
  }
}

/** 0..1: each motion's share of its frames, averaged (a motion not started yet counts 0). */
export function fractionOf(progress) {
  const motions = Object.values(progress?.motions || {});
  if (!motions.length) return 0;
  const sum = motions.reduce((acc, m) => acc + (m.frames_total ? Math.min(1, m.frames_done / m.frames_total) : 0), 0);
  return sum / motions.length;
}

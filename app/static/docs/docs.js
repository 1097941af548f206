// The API reference page: fetches the server's OpenAPI document and renders every operation, its
// parameters, bodies, responses and the error codes. Vanilla JS, no dependencies (served under the
// studio's Content-Security-Policy: scripts from this server only, no inline code).

const METHODS = ["get", "post", "put", "patch", "delete"];
const BOUND_KEYS = ["minimum", "exclusiveMinimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
  "minProperties", "maxProperties", "pattern", "const", "x-max-bytes", "x-max-pixels", "x-max-joints",
  "x-max-frames", "x-max-seconds", "x-max-depth", "x-max-number-chars", "x-max-length", "x-deadline-s",
  "x-body-timeout-s"];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === "") continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// Description text: paragraphs at blank lines, single line breaks joined, `code` spans as <code>.
function prose(text, cls = "desc") {
  return (text || "").split(/\n\s*\n/).filter((p) => p.trim()).map((para) =>
    el("p", { class: cls }, para.replace(/\s*\n\s*/g, " ").split(/(`[^`]*`)/).map((part) =>
      part.startsWith("`") && part.endsWith("`") && part.length > 1 ? el("code", {}, part.slice(1, -1)) : part)));
}

function deref(doc, node, seen = new Set()) {
  while (node && node.$ref && !seen.has(node.$ref)) {
    seen.add(node.$ref);
    const target = node.$ref.replace(/^#\//, "").split("/").reduce((o, k) => (o || {})[k], doc);
    const { $ref, ...siblings } = node;
    node = { ...target, ...siblings };
  }
  return node || {};
}

function refName(node) {
  return node && node.$ref ? node.$ref.split("/").pop() : "";
}

function typeText(doc, schema) {
  const s = deref(doc, schema);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.const !== undefined) return JSON.stringify(s.const);
  const alt = s.oneOf || s.anyOf;
  if (alt) return alt.map((a) => refName(a) || typeText(doc, a)).join(" | ");
  let type = Array.isArray(s.type) ? s.type.join(" | ") : s.type || "any";
  if (type === "array" && s.items) type = `array of ${refName(s.items) || typeText(doc, s.items)}`;
  if (s.format) type += ` (${s.format})`;
  if (s.contentMediaType) type += ` (${s.contentMediaType})`;
  return type;
}

function boundsText(doc, schema) {
  const s = deref(doc, schema);
  return BOUND_KEYS.filter((k) => s[k] !== undefined).map((k) => `${k}: ${s[k]}`).join(", ");
}

function schemaTree(doc, schema, depth = 0) {
  const s = deref(doc, schema);
  const props = s.properties || {};
  const names = Object.keys(props);
  if (!names.length || depth > 3) return null;
  const required = new Set(s.required || []);
  return el("ul", { class: "schema" }, names.map((name) => {
    const sub = deref(doc, props[name]);
    return el("li", {},
      el("code", {}, name), required.has(name) ? " (required) " : " ",
      el("span", { class: "type" }, refName(props[name]) || typeText(doc, props[name])), " ",
      el("span", { class: "bounds" }, boundsText(doc, props[name])),
      prose(sub.description),
      schemaTree(doc, props[name], depth + 1));
  }));
}

function parameters(doc, op, shared) {
  const params = [...(shared || []), ...(op.parameters || [])].map((p) => deref(doc, p));
  if (!params.length) return null;
  return el("table", {},
    el("tr", {}, el("th", {}, "Parameter"), el("th", {}, "In"), el("th", {}, "Type and bounds"),
      el("th", {}, "Description")),
    params.map((p) => el("tr", {},
      el("td", {}, el("code", {}, p.name), p.required ? " (required)" : ""), el("td", {}, p.in),
      el("td", {}, el("span", { class: "type" }, typeText(doc, p.schema)), " ",
        el("span", { class: "bounds" }, boundsText(doc, p.schema))),
      el("td", {}, prose(p.description)))));
}

function requestBody(doc, op) {
  if (!op.requestBody) return null;
  const body = deref(doc, op.requestBody);
  return el("div", {}, el("h4", {}, "Request body", body["x-max-bytes"] ? ` (at most ${body["x-max-bytes"]} bytes)` : ""),
    Object.entries(body.content || {}).map(([type, media]) => el("div", {},
      el("code", {}, type), " ", el("span", { class: "type" }, refName(media.schema) || typeText(doc, media.schema)),
      schemaTree(doc, media.schema))));
}

function responses(doc, op) {
  return el("table", {},
    el("tr", {}, el("th", {}, "Status"), el("th", {}, "Description"), el("th", {}, "Headers"), el("th", {}, "Body")),
    Object.entries(op.responses || {}).map(([status, raw]) => {
      const r = deref(doc, raw);
      const bodies = Object.entries(r.content || {}).map(([type, media]) => {
        const schema = deref(doc, media.schema);
        const codes = ((schema.properties || {}).error || {}).enum;
        return el("div", {}, el("code", {}, type), " ", refName(media.schema) || typeText(doc, media.schema),
          codes ? el("div", {}, "error: ", codes.map((c) => el("code", {}, c, " "))) : null);
      });
      return el("tr", {},
        el("td", { class: `status s${status[0]}` }, status), el("td", {}, prose(r.description)),
        el("td", {}, Object.keys(r.headers || {}).map((h) => el("div", {}, el("code", {}, h)))), el("td", {}, bodies));
    }));
}

function errorTable(doc) {
  const codes = deref(doc, doc.components.schemas.ErrorCode).oneOf || [];
  return el("section", { id: "errors" }, el("h2", {}, "Error codes"),
    el("p", {}, "Every error is JSON ", el("code", {}, '{"error": code, "message": text}'), "."),
    el("table", {}, el("tr", {}, el("th", {}, "Status"), el("th", {}, "error"), el("th", {}, "When")),
      codes.map((c) => el("tr", {}, el("td", { class: `status s${String(c["x-status"])[0]}` }, c["x-status"]),
        el("td", {}, el("code", {}, c.const)), el("td", {}, prose(c.description))))));
}

function render(doc) {
  const main = document.getElementById("reference");
  const toc = document.getElementById("toc");
  main.replaceChildren(...prose(doc.info.description));
  const byTag = new Map((doc.tags || []).map((t) => [t.name, []]));
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const tag = (item[method].tags || ["other"])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op: item[method], shared: item.parameters });
    }
  }
  for (const [tag, ops] of byTag) {
    if (!ops.length) continue;
    toc.append(el("h3", {}, tag));
    main.append(el("h2", { id: `tag-${tag}` }, tag));
    for (const { path, method, op, shared } of ops) {
      const id = op.operationId || `${method}-${path}`;
      toc.append(el("a", { href: `#${id}` }, `${method.toUpperCase()} ${path}`));
      const auth = op.security && op.security.length === 0 ? " (public)" : "";
      main.append(el("section", { class: "op", id },
        el("h3", {}, el("span", { class: `method ${method}` }, method), " ", el("span", { class: "path" }, path), auth),
        el("p", {}, op.summary || ""), prose(op.description),
        parameters(doc, op, shared), requestBody(doc, op), el("h4", {}, "Responses"), responses(doc, op)));
    }
  }
  toc.append(el("h3", {}, el("a", { href: "#errors" }, "Error codes")));
  main.append(errorTable(doc));
}

fetch("openapi.json", { headers: { Accept: "application/json" } })
  .then((resp) => {
    if (!resp.ok) throw new Error(`GET /openapi.json answered ${resp.status}`);
    return resp.json();
  })
  .then(render)
  .catch((err) => {
    document.getElementById("reference").replaceChildren(el("p", { class: "error" }, `Cannot show the reference: ${err.message}`));
  });

"use strict";
// texfleet's reference editor: compile the source, show the PDF page by page from the API's
// page previews, jump from a diagnostic or a click on a page to its line (SyncTeX, inverse),
// and mark in the pages what the line under the cursor made (SyncTeX, forward). The token is
// kept for this tab only (sessionStorage).

const $ = (id) => document.getElementById(id);
const MAIN = "main.tex";
const WIDTH = 600;
const MAX_PAGES = 50;
let job = null;
let pages = [];
let marking = 0;

function keep() {
  sessionStorage.setItem("texfleet.project", $("project").value.trim());
  sessionStorage.setItem("texfleet.token", $("token").value.trim());
}

function restore() {
  $("project").value = sessionStorage.getItem("texfleet.project") || "";
  $("token").value = sessionStorage.getItem("texfleet.token") || "";
}

function say(text) {
  $("status").textContent = text;
}

function call(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + $("token").value.trim() },
    options.headers || {});
  return fetch(path, Object.assign({}, options, { headers }));
}

async function problem(response) {
  try {
    const body = await response.json();
    return body.detail || body.title || response.statusText;
  } catch (_) {
    return response.statusText;
  }
}

const ended = (status) => !["Queued", "Running"].includes(status);

async function compile() {
  keep();
  say("compiling…");
  $("compile").disabled = true;
  try {
    const body = {
      project_id: $("project").value.trim(),
      input_latex: $("source").value,
      wordcount: $("count-words").checked,
    };
    let response = await call("/compile", {
      method: "POST",
      headers: { "Content-Type": "application/json", Prefer: "wait=60" },
      body: JSON.stringify(body),
    });
    if (!response.ok) return say(await problem(response));
    let answer = await response.json();
    while (!ended(answer.status)) {
      response = await call(`/compile/${answer.id}`, { headers: { Prefer: "wait=60" } });
      if (!response.ok) return say(await problem(response));
      answer = await response.json();
    }
    await show(answer);
  } catch (error) {
    say(String(error));
  } finally {
    $("compile").disabled = false;
  }
}

async function show(answer) {
  const took = answer.duration_ms == null ? "" : ` in ${(answer.duration_ms / 1000).toFixed(1)} s`;
  say(`${answer.status}${took}${answer.error ? ": " + answer.error.message : ""}`);
  showDiagnostics(answer.diagnostics || []);
  const words = answer.word_count;
  $("words").textContent = words
    ? `${words.text_words} words in the text, ${words.header_words} in headings, ` +
      `${words.other_words} elsewhere`
    : "";
  if (answer.status !== "Succeeded") return;
  job = answer;
  await showPages(answer.id);
}

function showDiagnostics(diagnostics) {
  const list = $("diagnostics");
  list.replaceChildren();
  for (const diagnostic of diagnostics) {
    const item = document.createElement("li");
    item.className = diagnostic.severity;
    const where = diagnostic.line ? `${diagnostic.file || MAIN}:${diagnostic.line}: ` : "";
    item.textContent = `${where}${diagnostic.message}`;
    if (diagnostic.line && (diagnostic.file || MAIN) === MAIN) {
      item.dataset.line = diagnostic.line;
      item.addEventListener("click", () => selectLine(diagnostic.line));
    }
    list.append(item);
  }
}

async function showPages(id) {
  const container = $("pages");
  for (const page of pages) URL.revokeObjectURL(page.image.src);
  container.replaceChildren();
  pages = [];
  for (let number = 1; number <= MAX_PAGES; number++) {
    const response = await pageImage(id, number);
    if (response.status === 404) break;
    if (!response.ok) return say(await problem(response));
    const size = (response.headers.get("Page-Size") || "").split(" ").map(Number);
    const image = new Image();
    image.src = URL.createObjectURL(await response.blob());
    image.alt = `page ${number}`;
    image.dataset.page = number;
    const frame = document.createElement("div");
    frame.className = "page";
    frame.append(image);
    container.append(frame);
    const page = { number, image, frame, size };
    image.addEventListener("click", (event) => findLine(page, event));
    pages.push(page);
  }
}

// A page's image; asked again while it is still being rendered (409) or the project has
// too many under way (429).
async function pageImage(id, number) {
  for (let attempt = 1; ; attempt++) {
    const response = await call(`/compile/${id}/pages/${number}?width=${WIDTH}`);
    if (![409, 429].includes(response.status) || attempt === 3) return response;
    const seconds = Number(response.headers.get("Retry-After")) || 1;
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  }
}

// The point of the page under a click, in points from its top left corner.
async function findLine(page, event) {
  if (!job || page.size.length !== 2) return;
  const box = page.image.getBoundingClientRect();
  const h = ((event.clientX - box.left) / box.width) * page.size[0];
  const v = ((event.clientY - box.top) / box.height) * page.size[1];
  const query = new URLSearchParams({ page: page.number, h: h.toFixed(1), v: v.toFixed(1) });
  const response = await call(`/compile/${job.id}/sync/pdf?${query}`);
  if (!response.ok) return say(await problem(response));
  const place = ((await response.json()).code || []).find((code) => code.file === MAIN);
  if (place) selectLine(place.line);
}

function selectLine(line) {
  const source = $("source");
  const lines = source.value.split("\n");
  const index = Math.min(Math.max(line, 1), lines.length) - 1;
  const start = lines.slice(0, index).reduce((sum, text) => sum + text.length + 1, 0);
  source.focus();
  source.setSelectionRange(start, start + lines[index].length);
  const height = parseFloat(getComputedStyle(source).lineHeight) || 19;
  source.scrollTop = Math.max(0, index * height - source.clientHeight / 3);
  markLine();
}

function cursorLine() {
  const source = $("source");
  return source.value.slice(0, source.selectionStart).split("\n").length;
}

// Marks in the pages the boxes the cursor's line made; only the latest question is drawn.
async function markLine() {
  if (!job) return;
  const asked = ++marking;
  const query = new URLSearchParams({ file: MAIN, line: cursorLine() });
  const response = await call(`/compile/${job.id}/sync/code?${query}`);
  if (!response.ok || asked !== marking) return;
  const boxes = (await response.json()).pdf || [];
  for (const mark of document.querySelectorAll(".mark")) mark.remove();
  for (const found of boxes) {
    const page = pages[found.page - 1];
    if (!page || page.size.length !== 2) continue;
    const scale = page.image.clientWidth / page.size[0];
    const mark = document.createElement("div");
    mark.className = "mark";
    mark.style.left = `${found.h * scale}px`;
    mark.style.top = `${found.v * scale}px`;
    mark.style.width = `${Math.max(found.width, 1) * scale}px`;
    mark.style.height = `${Math.max(found.height, 1) * scale}px`;
    page.frame.append(mark);
  }
}

let waiting = null;
function markSoon() {
  clearTimeout(waiting);
  waiting = setTimeout(markLine, 150);
}

restore();
$("compile").addEventListener("click", compile);
$("source").addEventListener("keyup", markSoon);
$("source").addEventListener("click", markSoon);

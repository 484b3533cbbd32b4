// The session page: move the seq (slider, arrow keys, clicks), keep the URL in step
// (?at=SEQ), fetch the panes for that seq from the JSON API, and follow new events live.
// Every piece of HTML put into the page comes from the server's escaping templates; stored
// text is never assembled into markup here.
"use strict";

(function () {
  const root = document.getElementById("session");
  if (!root) return;
  const d = root.dataset;
  const slider = document.getElementById("seq");
  const timeline = document.getElementById("timeline");
  const todos = document.getElementById("todos");
  const messages = document.getElementById("messages");
  const fork = document.getElementById("fork");
  const pageSize = Number(d.page);
  let at = Number(d.at);
  let last = Number(d.last);
  let start = Number(d.start);
  let following = at === last;
  let wanted = 0; // the newest state request; older answers are dropped
  let pending = null;

  function setText(selector, text) {
    document.querySelectorAll(selector).forEach((el) => { el.textContent = String(text); });
  }

  function markRows() {
    timeline.querySelectorAll("li.ev").forEach((li) => {
      const seq = Number(li.dataset.seq);
      li.classList.toggle("selected", seq === at);
      li.classList.toggle("future", seq > at);
    });
  }

  async function getJSON(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`${response.status} ${url}`);
    return response.json();
  }

  async function loadTimeline(seq) {
    const body = await getJSON(`${d.timelineUrl}?at=${seq}`);
    timeline.innerHTML = body.html;
    start = body.start;
    markRows();
  }

  async function loadState(seq) {
    const ticket = ++wanted;
    root.classList.add("loading");
    try {
      const body = await getJSON(`${d.stateUrl}?at=${seq}&html=1`);
      if (ticket !== wanted) return;
      todos.innerHTML = body.html.todos;
      messages.innerHTML = body.html.messages;
      if (d.writes === "yes") {
        const inside = body.openTurn !== null;
        fork.disabled = inside;
        fork.title = inside ? `turn ${body.openTurn} is still open at this seq: pick a seq between turns` : "";
      }
      root.dataset.shownAt = String(body.at);
    } finally {
      if (ticket === wanted) root.classList.remove("loading");
    }
  }

  function select(seq, { push = false } = {}) {
    seq = Math.max(0, Math.min(last, seq));
    if (Number.isNaN(seq)) return;
    at = seq;
    following = at === last;
    slider.value = String(at);
    setText("#seq-value", at);
    setText(".at", at);
    const url = new URL(window.location.href);
    url.searchParams.set("at", String(at));
    if (push) history.pushState({ at }, "", url); else history.replaceState({ at }, "", url);
    if (at < start || at >= start + pageSize) {
      loadTimeline(at).catch(report);
    } else {
      markRows();
    }
    clearTimeout(pending);
    pending = setTimeout(() => loadState(at).catch(report), 60);
    const row = document.getElementById(`seq-${at}`);
    if (row && row.offsetParent !== null) row.scrollIntoView({ block: "nearest" });
  }

  function report(error) {
    setText("#fork-result", String(error));
  }

  slider.addEventListener("input", () => select(Number(slider.value)));
  document.getElementById("prev").addEventListener("click", () => select(at - 1));
  document.getElementById("next").addEventListener("click", () => select(at + 1));
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target instanceof HTMLInputElement && target.type !== "range" && target.type !== "checkbox") return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const step = event.shiftKey ? 10 : 1;
    let seq = null;
    if (event.key === "ArrowLeft" || event.key === "ArrowDown") seq = at - step;
    else if (event.key === "ArrowRight" || event.key === "ArrowUp") seq = at + step;
    else if (event.key === "Home") seq = 0;
    else if (event.key === "End") seq = last;
    if (seq === null) return;
    event.preventDefault();
    select(seq);
  });
  // a click on a seq number, a pager link or a "written at" link selects that seq in place
  root.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("a.seq, a[data-goto]") : null;
    if (!link) return;
    event.preventDefault();
    const seq = link.dataset.goto !== undefined ? link.dataset.goto : link.closest("li.ev").dataset.seq;
    select(Number(seq), { push: true });
  });
  window.addEventListener("popstate", () => {
    const seq = new URL(window.location.href).searchParams.get("at");
    select(seq === null ? last : Number(seq));
  });
  document.getElementById("verbose").addEventListener("change", (event) => {
    document.body.classList.toggle("verbose", event.target.checked);
  });

  fork.addEventListener("click", async () => {
    const out = document.getElementById("fork-result");
    out.textContent = "forking…";
    const response = await fetch(`${d.forkUrl}?at=${at}`, {
      method: "POST",
      body: new URLSearchParams({ fork_token: d.forkToken }),
    });
    const body = await response.json();
    out.textContent = "";
    if (response.ok) {
      const link = document.createElement("a");
      link.href = body.url;
      link.textContent = `forked into ${body.id}`;
      out.append(link);
    } else {
      out.textContent = body.error;
    }
  });

  // live: each appended event arrives as a rendered row
  const live = document.getElementById("live");
  const source = new EventSource(`${d.eventsUrl}?from=${Number(d.next)}`);
  source.addEventListener("open", () => live.classList.add("on"));
  source.addEventListener("error", () => live.classList.remove("on"));
  source.addEventListener("gone", () => { live.textContent = "deleted"; source.close(); });
  source.addEventListener("append", (message) => {
    const event = JSON.parse(message.data);
    if (event.seq <= last) return;
    const wasFollowing = following;
    last = event.seq;
    root.dataset.last = String(last);
    slider.max = String(last);
    setText("#seq-last", last);
    setText("#events", last + 1);
    setText("#updated", event.updated);
    if (event.type === "turn/start") {
      const turns = document.getElementById("turns");
      const count = Number(turns.dataset.count) + 1;
      turns.dataset.count = String(count);
      turns.textContent = `${count} turn${count === 1 ? "" : "s"}`;
    }
    const list = timeline.querySelector("ol.events");
    if (list && event.seq < start + pageSize && !document.getElementById(`seq-${event.seq}`)) {
      list.insertAdjacentHTML("beforeend", event.html);
    } else {
      const later = timeline.querySelector(".pager.later");
      if (later) later.hidden = false;
    }
    if (wasFollowing) select(last); else markRows();
  });

  markRows();
})();

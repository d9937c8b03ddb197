// Cairn dashboard: live updates from the event stream, retry countdowns, and
// the operator actions. The pages work without it (minus those three).
(function () {
  "use strict";

  var body = document.body;
  var live = document.getElementById("live");
  var liveURL = body.dataset.live;
  var runID = body.dataset.runId || "";
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var csrf = csrfMeta ? csrfMeta.content : "";
  var flashEl = document.getElementById("flash");
  var sseEl = document.getElementById("sse");

  function flash(text, kind) {
    if (!flashEl) return;
    flashEl.textContent = text;
    flashEl.className = "flash" + (kind === "error" ? " error" : "");
    flashEl.hidden = false;
  }

  // Countdowns: every [data-due] element says "retry in Ns", from its due
  // time and the browser's clock. When one runs out, the live part is
  // fetched once more (an attempt that starts sends no event).
  var expired = {};
  function tick() {
    var now = Date.now();
    var els = document.querySelectorAll("[data-due]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var due = Date.parse(el.dataset.due);
      if (isNaN(due)) continue;
      var s = Math.ceil((due - now) / 1000);
      // data-label (a snooze: "runs again") replaces "retry".
      var label = el.dataset.label || "retry";
      el.textContent = s > 0 ? label + " in " + s + "s" : (el.dataset.label ? "running again now" : "retrying now");
      if (s <= 0 && !expired[el.dataset.due]) {
        expired[el.dataset.due] = true;
        setTimeout(refresh, 1500);
      }
    }
  }

  // refresh swaps in the page's live part, one fetch at a time; events
  // that arrive during a fetch cause one more.
  var busy = false, again = false;
  function refresh() {
    if (!live || !liveURL) return;
    if (busy) { again = true; return; }
    busy = true;
    fetch(liveURL, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (res.status === 401) { window.location.reload(); return null; }
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text();
      })
      .then(function (html) {
        if (html !== null) { live.innerHTML = html; tick(); }
      })
      .catch(function () { /* the next event or countdown tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  // The event stream: a run page refreshes on its run's events, a list on
  // any. It starts after the last notification the page's data includes.
  var types = ["step_failed", "run_failed", "retry_scheduled", "run_recovered", "run_succeeded",
    "run_cancelled", "run_needs_attention", "run_waiting", "run_compensating", "run_compensated",
    "group_rolled_back", "message"];
  function connect() {
    if (!live || !liveURL || !window.EventSource) return;
    var url = "/api/v1/events";
    if (body.dataset.eventsAfter) url += "?last_event_id=" + encodeURIComponent(body.dataset.eventsAfter);
    var es = new EventSource(url);
    var opened = false;
    function onEvent(ev) {
      if (runID) {
        var d;
        try { d = JSON.parse(ev.data); } catch (e) { return; }
        if (!d || d.run_id !== runID) return;
      }
      body.dataset.lastEvent = ev.type; // for tests and the curious
      refresh();
    }
    for (var i = 0; i < types.length; i++) es.addEventListener(types[i], onEvent);
    es.onopen = function () {
      if (sseEl) sseEl.className = "sse open";
      body.dataset.sse = "open";
      if (opened) refresh(); // after a reconnect: catch up
      opened = true;
    };
    es.onerror = function () {
      if (sseEl) sseEl.className = "sse error";
      body.dataset.sse = "error";
    };
  }

  // Actions: a button with data-action-url POSTs there with the CSRF token.
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest ? ev.target.closest("button[data-action-url]") : null;
    if (!b) return;
    ev.preventDefault();
    if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return;
    var what = b.textContent.trim();
    b.disabled = true;
    fetch(b.dataset.actionUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json", "Accept": "application/json" },
      body: "{}"
    }).then(function (res) {
      if (res.ok) { flash(what + ": done."); refresh(); return; }
      if (res.status === 401) { window.location.reload(); return; }
      return res.json().then(function (p) {
        flash(what + " refused: " + (p.detail || p.title || ("HTTP " + res.status)), "error");
      }, function () {
        flash(what + " failed: HTTP " + res.status, "error");
      });
    }).catch(function (e) {
      flash(what + " failed: " + e.message, "error");
    }).then(function () {
      b.disabled = false;
    });
  });

  // The signal form of a waiting run: POSTs its payload (JSON; empty for
  // null) to data-signal-url with the CSRF token.
  document.addEventListener("submit", function (ev) {
    var f = ev.target;
    if (!f.dataset || !f.dataset.signalUrl) return;
    ev.preventDefault();
    var payload = f.elements.payload.value.trim();
    if (payload !== "") {
      try { JSON.parse(payload); } catch (e) { flash("Signal not sent: the payload is not JSON: " + e.message, "error"); return; }
    }
    var b = f.querySelector("button");
    b.disabled = true;
    fetch(f.dataset.signalUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json", "Accept": "application/json" },
      body: payload
    }).then(function (res) {
      if (res.ok) {
        return res.json().then(function (r) {
          flash(r.outcome === "delivered" ? "Signal delivered: step " + r.step + " done." : "Signal " + r.outcome + ".");
          window.setTimeout(function () { window.location.reload(); }, 600);
        });
      }
      if (res.status === 401) { window.location.reload(); return; }
      return res.json().then(function (p) {
        flash("Signal refused: " + (p.detail || p.title || ("HTTP " + res.status)), "error");
      }, function () {
        flash("Signal failed: HTTP " + res.status, "error");
      });
    }).catch(function (e) {
      flash("Signal failed: " + e.message, "error");
    }).then(function () {
      b.disabled = false;
    });
  });

  tick();
  setInterval(tick, 1000);
  connect();
})();

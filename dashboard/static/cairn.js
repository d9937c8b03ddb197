// Cairn dashboard: live updates from the event stream, retry countdowns,
// running durations, the operator actions and the admins' bulk actions. The
// pages work without it (minus those).
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

  // human writes a duration in ms as the server does (humanDuration):
  // "850ms", "42s", "3m 04s", "2h 05m", "3d 04h".
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function human(ms) {
    if (ms <= 0) return "0s";
    if (ms < 1000) return Math.floor(ms) + "ms";
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + pad(Math.floor(s % 3600 / 60)) + "m";
    return Math.floor(s / 86400) + "d " + pad(Math.floor(s % 86400 / 3600)) + "h";
  }

  function tick() {
    var now = Date.now();
    // Durations of runs not ended: [data-since] says since when.
    var ds = document.querySelectorAll("[data-since]");
    for (var j = 0; j < ds.length; j++) {
      var since = Date.parse(ds[j].dataset.since);
      if (!isNaN(since)) ds[j].textContent = human(now - since);
    }
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

  // outputFolds maps the data-output key of each output block of the
  // live part to whether it is open.
  function outputFolds() {
    var m = {};
    if (!live) return m;
    var blocks = live.querySelectorAll("details[data-output]");
    for (var i = 0; i < blocks.length; i++) m[blocks[i].dataset.output] = blocks[i].open;
    return m;
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
        if (html === null) return;
        var picked = pickedIDs();
        var folds = outputFolds();
        live.innerHTML = html;
        // An output (or input) the operator opened or closed stays so.
        var blocks = live.querySelectorAll("details[data-output]");
        for (var j = 0; j < blocks.length; j++) {
          var k = blocks[j].dataset.output;
          if (Object.prototype.hasOwnProperty.call(folds, k)) blocks[j].open = folds[k];
        }
        // The selection of the bulk actions survives the refresh.
        var boxes = live.querySelectorAll("input.pick");
        for (var i = 0; i < boxes.length; i++) boxes[i].checked = picked.indexOf(boxes[i].value) >= 0;
        updateBulk();
        tick();
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

  // Bulk actions (admins, on the runs list): recover or cancel the runs
  // selected, or every run the list's filters match. A dry run counts the
  // runs the action applies to; the confirmation says how many; the action
  // then carries that count, and the server does nothing if it changed.
  var bulkEl = document.getElementById("bulk");
  function pickedIDs() {
    var out = [];
    var boxes = document.querySelectorAll("input.pick:checked");
    for (var i = 0; i < boxes.length; i++) out.push(boxes[i].value);
    return out;
  }
  function updateBulk() {
    if (!bulkEl) return;
    var n = pickedIDs().length;
    var countEl = document.getElementById("bulk-count");
    if (countEl) countEl.textContent = n === 0 ? "No run selected" : n + (n === 1 ? " run selected" : " runs selected");
    var bs = bulkEl.querySelectorAll('button[data-scope="selected"]');
    for (var i = 0; i < bs.length; i++) bs[i].disabled = n === 0;
    var all = document.getElementById("pick-all");
    if (all) {
      var boxes = document.querySelectorAll("input.pick");
      all.checked = boxes.length > 0 && n === boxes.length;
    }
  }
  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (t.id === "pick-all") {
      var boxes = document.querySelectorAll("input.pick");
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
    }
    if (t.id === "pick-all" || (t.classList && t.classList.contains("pick"))) updateBulk();
  });
  function postJSON(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body)
    }).then(function (res) {
      if (res.status === 401) { window.location.reload(); throw new Error("signed out"); }
      return res.json().then(function (j) {
        if (!res.ok) throw new Error(j.detail || j.title || ("HTTP " + res.status));
        return j;
      });
    });
  }
  if (bulkEl) {
    bulkEl.addEventListener("click", function (ev) {
      var b = ev.target.closest ? ev.target.closest("button[data-bulk]") : null;
      if (!b) return;
      var action = b.dataset.bulk;
      var verb = action === "recover" ? "Recover" : "Cancel";
      var req = { action: action };
      var what;
      if (b.dataset.scope === "selected") {
        req.ids = pickedIDs();
        if (req.ids.length === 0) return;
        what = "of the " + req.ids.length + " selected";
      } else {
        var f = {};
        if (bulkEl.dataset.filterStatus) f.status = bulkEl.dataset.filterStatus;
        if (bulkEl.dataset.filterWorkflow) f.workflow = bulkEl.dataset.filterWorkflow;
        if (bulkEl.dataset.filterOwner) f.owner = bulkEl.dataset.filterOwner;
        req.filter = f;
        what = "matching " + bulkEl.dataset.filterText;
      }
      b.disabled = true;
      req.dry_run = true;
      postJSON(bulkEl.dataset.bulkUrl, req).then(function (dry) {
        if (dry.eligible === 0) {
          flash(verb + ": no run " + what + " can be " + (action === "recover" ? "recovered" : "cancelled") + ".", "error");
          return null;
        }
        var msg = verb + " " + dry.eligible + (dry.eligible === 1 ? " run" : " runs") + " " + what + "?";
        if (dry.matched > dry.eligible) {
          msg += " (" + (dry.matched - dry.eligible) + " other" + (dry.matched - dry.eligible === 1 ? " is" : "s are") +
            " not in a state to " + action + " and stay as they are.)";
        }
        if (!window.confirm(msg)) return null;
        req.dry_run = false;
        req.expect = dry.eligible;
        return postJSON(bulkEl.dataset.bulkUrl, req);
      }).then(function (res) {
        if (!res) return;
        body.dataset.bulkApplied = String(res.applied.length);
        var text = verb + ": " + res.applied.length + (res.applied.length === 1 ? " run" : " runs") + " done";
        if (res.refused.length) {
          text += "; " + res.refused.length + " refused (" + res.refused[0].id + ": " + res.refused[0].detail +
            (res.refused.length > 1 ? ", …" : "") + ")";
        }
        flash(text + ".", res.refused.length ? "error" : "");
        var boxes = document.querySelectorAll("input.pick:checked");
        for (var i = 0; i < boxes.length; i++) boxes[i].checked = false;
        updateBulk();
        refresh();
      }).catch(function (e) {
        flash(verb + " refused: " + e.message, "error");
      }).then(function () {
        b.disabled = b.dataset.scope === "selected" && pickedIDs().length === 0;
      });
    });
  }

  // Workers start and stop without a run's event: the Workers page
  // (data-poll) and a page that says no live worker serves the queue
  // fetch their live part every 5 s.
  setInterval(function () {
    if (body.dataset.poll || document.getElementById("no-worker")) refresh();
  }, 5000);

  updateBulk();
  tick();
  setInterval(tick, 1000);
  connect();
})();

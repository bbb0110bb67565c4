"use strict";
// The viewer: same-origin calls to this host's API with the key the user pasted (kept in sessionStorage; in
// localStorage too only when the user ticks "remember", so a run link opened in a new tab needs no paste).
// Every value from the API is written with textContent (never parsed as HTML).
(function () {
  var KEY = "openwop.viewer.apiKey";
  // A remembered key (opt-in) seeds each new tab's session.
  if (!sessionStorage.getItem(KEY) && localStorage.getItem(KEY)) {
    sessionStorage.setItem(KEY, localStorage.getItem(KEY));
  }
  var $ = function (id) { return document.getElementById(id); };

  function projectId(id) {
    var bytes = new TextEncoder().encode(id), out = "";
    for (var i = 0; i < bytes.length; i++) {
      var b = bytes[i], ch = String.fromCharCode(b);
      out += /[A-Za-z0-9._-]/.test(ch) ? ch : "~" + (b < 16 ? "0" : "") + b.toString(16).toUpperCase();
    }
    return out;
  }

  function status(text, isError) {
    var el = $("status");
    el.textContent = text;
    el.className = isError ? "error" : "";
  }

  function api(path) {
    var key = sessionStorage.getItem(KEY);
    if (!key) { return Promise.reject(new Error("paste an API key first")); }
    return fetch(path, {headers: {"Authorization": "Bearer " + key, "OpenWOP-Version": "2.0",
                                  "Accept": "application/json"}, credentials: "omit"})
      .then(function (r) {
        return r.text().then(function (text) {
          var body = text ? JSON.parse(text) : null;
          if (!r.ok) {
            var err = new Error((body && body.error ? body.error + ": " + body.message : "HTTP " + r.status));
            err.status = r.status;
            throw err;
          }
          return body;
        });
      });
  }

  function cell(row, value, cls) {
    var td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "-" : String(value);
    if (cls) { td.className = cls; }
    row.appendChild(td);
    return td;
  }

  function clear(el) { while (el.firstChild) { el.removeChild(el.firstChild); } }

  function pointers(el, ptrs, root) {
    // RFC 6901 pointers as marked spans ("" is the whole value: ``root`` names it).
    ptrs.forEach(function (ptr) {
      var s = document.createElement("span");
      s.className = "pointer";
      s.textContent = ptr || root;
      el.appendChild(s);
      el.appendChild(document.createTextNode(" "));
    });
  }

  function fmt(n, digits) {
    return typeof n === "number" ? n.toFixed(digits === undefined ? 2 : digits) : "-";
  }

  // ------------------------------------------------------------------ runs

  function filters() {
    return {suite: $("filter-suite").value.trim(), agent: $("filter-agent").value.trim(),
            name: $("filter-name").value.trim(), verdict: $("filter-verdict").value,
            score: $("filter-score").value === "" ? null : Number($("filter-score").value)};
  }

  function evalRuns(f) {
    // The tenant's eval runs (suite, agent@version, name, score, verdict) by runId; {} on a host without the route.
    var qs = "?limit=100";
    ["suite", "agent", "name"].forEach(function (k) { if (f[k]) { qs += "&" + k + "=" + encodeURIComponent(f[k]); } });
    return api("/host/openwop-serverless/eval-runs" + qs).then(function (page) {
      var out = {};
      (page.evalRuns || []).forEach(function (e) { out[e.runId] = e; });
      return out;
    }).catch(function () { return {}; });
  }

  function at(id, version) { return id ? id + (version ? "@" + version : "") : "-"; }

  function loadRuns() {
    var f = filters(), evalOnly = Boolean(f.suite || f.agent || f.name || f.verdict || f.score !== null);
    // Filtered: the eval runs the host listed for suite/agent/name, narrowed by verdict and score; else every run.
    return Promise.all([evalOnly ? Promise.resolve(null) : api("/runs?limit=100"), evalRuns(f)]).then(function (res) {
      var body = $("runs").tBodies[0], evals = res[1], shown = 0;
      var runs = res[0] ? res[0].runs || [] : Object.keys(evals).map(function (id) { return evals[id]; });
      clear(body);
      runs.forEach(function (run) {
        var e = evals[run.runId];
        if (evalOnly && (!e || (f.verdict && e.verdict !== f.verdict) ||
                         (f.score !== null && !(typeof e.aggregateScore === "number" && e.aggregateScore >= f.score)))) {
          return;
        }
        var tr = document.createElement("tr");
        tr.className = "clickable run-row";
        tr.dataset.runId = run.runId;
        cell(tr, run.runId);
        cell(tr, run.parentRunId ? "fork of " + run.parentRunId : "-");
        cell(tr, e ? null : run.workflowId);
        cell(tr, e ? at(e.suiteId, e.suiteVersion) : null, "suite");
        cell(tr, e ? at(e.agentId, e.agentVersion) : null, "agent");
        cell(tr, e ? e.name : null, "name");
        cell(tr, e ? fmt(e.aggregateScore) : null, "score");
        cell(tr, e ? e.verdict : null, "verdict" + (e && e.verdict ? " " + e.verdict : ""));
        cell(tr, run.status, "badge");
        cell(tr, run.startedAt);
        tr.addEventListener("click", function () { location.hash = "run=" + encodeURIComponent(run.runId); });
        body.appendChild(tr);
        shown++;
      });
      status(shown + " runs");
    });
  }

  function allEvents(wire) {
    var out = [];
    function next(after) {
      var qs = "?timeout=1" + (after === null ? "" : "&afterSequence=" + after);
      return api("/runs/" + wire + "/events/poll" + qs).then(function (page) {
        var evs = page.events || [];
        out = out.concat(evs);
        if (!evs.length) { return out; }
        return next(evs[evs.length - 1].sequence);
      });
    }
    return next(null);
  }

  function wholeReport(wire) {
    // Every page of the eval report, its tasks joined (a page holds at least one task).
    var path = "/host/openwop-serverless/runs/" + wire + "/eval-report?limit=1000";
    return api(path).then(function (rep) {
      var pages = rep.taskCount || 0;
      function more(cursor) {
        if (!cursor || pages-- <= 0) { delete rep.nextCursor; return rep; }
        return api(path + "&cursor=" + encodeURIComponent(cursor)).then(function (page) {
          rep.tasks = rep.tasks.concat(page.tasks);
          return more(page.nextCursor);
        });
      }
      return more(rep.nextCursor);
    });
  }

  // ------------------------------------------------------------------ one run

  function showRun(runId) {
    var wire = projectId(runId);
    $("runs-view").hidden = false;
    $("run-view").hidden = false;
    $("eval-view").hidden = true;
    $("fork-view").hidden = true;
    $("run-id").textContent = runId;
    status("loading " + runId);
    return Promise.all([api("/runs/" + wire), allEvents(wire)]).then(function (res) {
      var snap = res[0], events = res[1];
      $("run-status").textContent = snap.status;
      var started = events.filter(function (e) { return e.type === "eval.started"; })[0];
      var isEval = !!started;
      var what = isEval
        ? "suite " + started.payload.suiteId + "@" + started.payload.suiteVersion
        : "workflow " + (snap.workflowId || "-");
      $("run-meta").textContent = what + " · " + events.length + " events" +
        (snap.parentRunId ? " · forked from " + snap.parentRunId : "");
      var work = [];
      var report = isEval && ["completed", "failed", "cancelled"].indexOf(snap.status) >= 0
        ? wholeReport(wire) : Promise.resolve(null);
      work.push(report.then(function (rep) {
        timeline(events, rep, snap);
        if (rep) { evalView(rep); return trajectoriesView(rep); }
      }));
      if (snap.parentRunId) { work.push(forkView(snap.parentRunId, runId)); }
      return Promise.all(work).then(function () { status("run " + runId); });
    });
  }

  function provenanceByCall(rep) {
    var out = {};
    if (!rep) { return out; }
    rep.tasks.forEach(function (t) {
      t.trialResults.forEach(function (tr) {
        tr.toolCalls.forEach(function (c) { out[c.callId] = c.provenance; });
      });
    });
    return out;
  }

  function timeline(events, rep, snap) {
    var list = $("events");
    clear(list);
    var spans = {}, order = [], usage = {}, prov = provenanceByCall(rep), resolved = [];
    var calls = $("tool-calls").tBodies[0];
    clear(calls);
    events.forEach(function (e) {
      var li = document.createElement("li");
      li.textContent = e.type + (e.nodeId ? " [" + e.nodeId + "]" : "") + " " + (e.timestamp || "");
      list.appendChild(li);
      var p = e.payload || {};
      if (e.nodeId && e.type === "node.started") {
        spans[e.nodeId] = {from: e.sequence, to: null, outcome: "running"};
        order.push(e.nodeId);
      } else if (e.nodeId && /^node\.(completed|failed|skipped|cancelled)$/.test(e.type) && spans[e.nodeId]) {
        spans[e.nodeId].to = e.sequence;
        spans[e.nodeId].outcome = e.type.slice(5);
      }
      if (e.type === "agent.invocation-started" && p.invocationId) {
        spans["agent " + p.invocationId] = {from: e.sequence, to: null, outcome: "running"};
        order.push("agent " + p.invocationId);
        if (p.resolvedAgentVersion) {  // the version decided at create: by pin, by channel, or stable by default
          var what = p.agentId + "@" + p.resolvedAgentVersion + (p.resolvedChannel ? " (channel " +
            p.resolvedChannel + ")" : "");
          if (resolved.indexOf(what) < 0) { resolved.push(what); }
        }
      } else if (e.type === "agent.invocation-completed" && spans["agent " + p.invocationId]) {
        spans["agent " + p.invocationId].to = e.sequence;
        spans["agent " + p.invocationId].outcome = "completed";
      }
      if (e.type === "provider.usage") {  // one model call: its tokens and estimated cost (RFC 0026)
        usage["model calls"] = (usage["model calls"] || 0) + 1;
        ["inputTokens", "outputTokens", "costEstimateUsd"].forEach(function (k) {
          if (typeof p[k] === "number") { usage[k] = (usage[k] || 0) + p[k]; }
        });
      }
      if (e.type === "agent.tool-returned") {
        var kind = prov[p.callId];
        if (!kind) {
          if (p.error && (p.error.code === "replay_source_missing" || p.error.code === "forbidden")) {
            kind = "refused";
          } else {
            kind = snap.parentRunId ? "recorded" : "live";
          }
        }
        var tr = document.createElement("tr");
        tr.className = "tool-call prov-" + kind;
        cell(tr, e.sequence);
        cell(tr, p.toolName);
        cell(tr, p.callId);
        cell(tr, p.status);
        cell(tr, kind, "provenance");
        calls.appendChild(tr);
      }
    });
    var sbody = $("spans").tBodies[0];
    clear(sbody);
    order.forEach(function (id) {
      var tr = document.createElement("tr");
      cell(tr, id); cell(tr, spans[id].from); cell(tr, spans[id].to); cell(tr, spans[id].outcome);
      sbody.appendChild(tr);
    });
    $("agent-versions").textContent = resolved.length ? "agent versions: " + resolved.join(", ") : "";
    var keys = Object.keys(usage);
    $("usage").textContent = keys.length ? "usage: " + keys.map(function (k) { return k + " " + usage[k]; }).join(", ")
      : "usage: no model calls recorded";
  }

  // ------------------------------------------------------------------ eval compare + diagnostics

  function evalView(rep) {
    $("eval-view").hidden = false;
    $("eval-aggregate").textContent = "suite " + rep.suiteId + "@" + rep.suiteVersion + " · agent " + rep.agentId +
      " · aggregate " + fmt(rep.aggregateScore, 3) + (rep.baselineRunId ? " vs baseline " +
      fmt(rep.baselineAggregateScore, 3) + " (scoreDelta " + fmt(rep.scoreDelta, 3) + ", paired verdict " +
      rep.pairedVerdict + " over " + rep.pairedTaskCount + " tasks)" : " · no baseline") + " · verdict " + rep.verdict;
    var body = $("eval-tasks").tBodies[0];
    clear(body);
    var diag = $("eval-diagnostics");
    clear(diag);
    rep.tasks.forEach(function (t) {
      var tr = document.createElement("tr");
      tr.className = "task-row " + t.verdict;
      tr.dataset.taskId = t.taskId;
      cell(tr, t.taskId);
      cell(tr, t.baselineScore === null ? "-" : fmt(t.baselineScore));
      cell(tr, fmt(t.score));
      cell(tr, t.trials.passed + "/" + t.trials.total + (t.passAllK ? " ✓" : " ✗"));
      cell(tr, t.fixtureMissCount);
      cell(tr, t.liveToolCalls);
      cell(tr, fmt(t.costUsd, 4));
      cell(tr, t.latencyMs);
      cell(tr, t.verdict, "verdict");
      body.appendChild(tr);
      if (!t.fixtureMisses.length && t.verdict !== "regressed") { return; }
      var box = document.createElement("div");
      box.className = "diagnostic";
      var h = document.createElement("h4");
      h.textContent = t.taskId + ": expected " + JSON.stringify(t.expected.match || t.expected.kind) +
        ", actual " + t.trialResults.map(function (r) { return JSON.stringify(r.actual); }).join(" / ");
      box.appendChild(h);
      t.fixtureMisses.forEach(function (m) {
        var p = document.createElement("p");
        p.className = "miss";
        p.appendChild(document.createTextNode("fixture miss (trial " + m.trial + "): " + m.tool + " " +
          JSON.stringify(m.args) + "; closest recorded call " +
          (m.closest ? JSON.stringify(m.closest.args) + " from " + (m.recordedFrom || "-") : "none") + "; differs at "));
        pointers(p, m.differingPointers.length ? m.differingPointers : ["(tool name)"], "(root)");
        box.appendChild(p);
      });
      diag.appendChild(box);
    });
  }

  // ------------------------------------------------------------------ trajectories side by side

  function short(value) {
    var text = JSON.stringify(value);
    return text === undefined ? "" : (text.length > 160 ? text.slice(0, 157) + "..." : text);
  }

  function stepText(s) {
    var parts = [s.type];
    if (s.tool) { parts.push(s.tool); }
    if (s.status && s.status !== "ok") { parts.push(s.status); }
    ["args", "answer", "output", "text"].forEach(function (k) { if (k in s) { parts.push(short(s[k])); } });
    if (s.argsHash) { parts.push(s.argsHash); }
    return parts.join(" ");
  }

  function trialOf(task, n) {
    return (task.trialResults || []).filter(function (r) { return r.trial === n; })[0] || null;
  }

  function stepsList(steps, div) {
    var ol = document.createElement("ol");
    ol.start = 0;
    ol.className = "trajectory";
    (steps || []).forEach(function (s, i) {
      var li = document.createElement("li");
      li.dataset.step = i;
      li.textContent = stepText(s);
      if (div && div.step === i) { li.className = "diverged"; li.title = div.kind; }
      ol.appendChild(li);
    });
    if (div && div.step >= (steps || []).length) {
      var end = document.createElement("li");
      end.className = "diverged ended";
      end.dataset.step = div.step;
      end.textContent = "(the trajectory ends)";
      ol.appendChild(end);
    }
    return ol;
  }

  function trajectoriesView(rep) {
    // Per task, the baseline's and the candidate's trajectory of the same trial (the divergence's, else trial 1),
    // the first divergence marked on both sides. The baseline's steps come from its own report.
    var box = $("eval-trajectories");
    clear(box);
    if (!rep.baselineRunId) { box.hidden = true; return Promise.resolve(); }
    box.hidden = false;
    var head = document.createElement("h4");
    head.textContent = "Trajectories, baseline | candidate";
    box.appendChild(head);
    var note = document.createElement("p");
    note.id = "trajectories-status";
    note.textContent = "loading the baseline's trajectories";
    box.appendChild(note);
    return wholeReport(projectId(rep.baselineRunId)).then(function (base) {
      var byTask = {};
      base.tasks.forEach(function (t) { byTask[t.taskId] = t; });
      note.textContent = "baseline " + rep.baselineRunId + " vs candidate " + rep.runId;
      rep.tasks.forEach(function (t) {
        var div = t.divergence || null, n = div ? div.trial : 1;
        var details = document.createElement("details");
        details.className = "trajectory-pair" + (div ? " has-divergence" : "");
        details.dataset.taskId = t.taskId;
        details.open = !!div;
        var summary = document.createElement("summary");
        summary.textContent = t.taskId + " (trial " + n + "): " + (div ? "first divergence at step " + div.step +
          ", " + div.kind + " " : "same steps");
        pointers(summary, div ? div.pointers : [], "(whole value)");
        details.appendChild(summary);
        var grid = document.createElement("div");
        grid.className = "side-by-side";
        var bt = byTask[t.taskId] ? trialOf(byTask[t.taskId], n) : null, ct = trialOf(t, n);
        [["baseline", bt], ["candidate", ct]].forEach(function (side) {
          var col = document.createElement("div");
          col.className = "trajectory-" + side[0];
          var h = document.createElement("h4");
          h.textContent = side[0];
          col.appendChild(h);
          if (side[1]) { col.appendChild(stepsList(side[1].trajectory, div)); }
          else { col.appendChild(document.createTextNode("no such trial")); }
          grid.appendChild(col);
        });
        details.appendChild(grid);
        box.appendChild(details);
      });
    }).catch(function (err) { note.textContent = "baseline trajectories unavailable: " + err.message; });
  }

  // ------------------------------------------------------------------ fork side by side

  function forkView(sourceId, forkId) {
    var path = "/runs/" + projectId(sourceId) + ":diff?against=" + encodeURIComponent(projectId(forkId));
    return Promise.all([api(path), allEvents(projectId(sourceId)), allEvents(projectId(forkId))]).then(function (res) {
      var diff = res[0];
      $("fork-view").hidden = false;
      $("fork-source-id").textContent = sourceId;
      $("fork-fork-id").textContent = forkId;
      var changed = {};
      (diff.eventDiffs || []).forEach(function (d) { changed[d.seq] = d.op; });
      $("fork-summary").textContent = diff.divergedAtSeq === null || diff.divergedAtSeq === undefined
        ? "identical logs" : "diverged at seq " + diff.divergedAtSeq + " (" + (diff.eventDiffs || []).length +
        " differing events)";
      [["fork-source", res[1]], ["fork-fork", res[2]]].forEach(function (pair) {
        var ol = $(pair[0]);
        clear(ol);
        pair[1].forEach(function (e) {
          var li = document.createElement("li");
          li.dataset.seq = e.sequence;
          li.textContent = e.type + (e.nodeId ? " [" + e.nodeId + "]" : "") +
            (e.payload && e.payload.status ? " " + e.payload.status : "");
          if (changed[e.sequence]) { li.className = "diverged"; li.title = changed[e.sequence]; }
          ol.appendChild(li);
        });
      });
    }).catch(function (err) { $("fork-summary").textContent = "diff unavailable: " + err.message; });
  }

  // ------------------------------------------------------------------ wiring

  function route() {
    var m = /^#run=([^&]+)$/.exec(location.hash);
    var p = m ? showRun(decodeURIComponent(m[1])) : Promise.resolve();
    return p.catch(function (err) { status(err.message, true); });
  }

  $("key-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var key = $("api-key").value.trim();
    if (key) {
      sessionStorage.setItem(KEY, key);
      if ($("remember-key").checked) { localStorage.setItem(KEY, key); } else { localStorage.removeItem(KEY); }
    }
    $("api-key").value = "";
    loadRuns().then(route).catch(function (err) { status(err.message, true); });
  });
  $("forget-key").addEventListener("click", function () {
    sessionStorage.removeItem(KEY);
    localStorage.removeItem(KEY);
    clear($("runs").tBodies[0]);
    $("run-view").hidden = true;
    status("key forgotten");
  });
  $("reload-runs").addEventListener("click", function () {
    loadRuns().catch(function (err) { status(err.message, true); });
  });
  $("run-filters").addEventListener("submit", function (ev) {
    ev.preventDefault();
    loadRuns().catch(function (err) { status(err.message, true); });
  });
  window.addEventListener("hashchange", route);
  // ``#key=KEY`` (the URL ``serve`` prints), alone or beside ``run=RUN`` in any order (``#key=KEY&run=RUN``): a
  // fragment is never sent to a server; the key is kept like a pasted one and taken out of the address bar at once,
  // which keeps ``#run=RUN``.
  var parts = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("=");
    if (i > 0) { parts[kv.slice(0, i)] = kv.slice(i + 1); }
  });
  if (parts.key) {
    sessionStorage.setItem(KEY, decodeURIComponent(parts.key));
    history.replaceState(null, "", location.pathname + location.search + (parts.run ? "#run=" + parts.run : ""));
  }
  if (sessionStorage.getItem(KEY)) {
    loadRuns().then(route).catch(function (err) { status(err.message, true); });
  } else {
    status("paste an API key to start");
  }
})();

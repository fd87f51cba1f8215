// The status page at "/": streams, groups, members, the shard map and recent events, read from
// the JSON endpoints every few seconds. One document with its CSS and script inline (nothing is
// fetched from elsewhere); with auth on it asks for a token and keeps it for the browser tab only.
#include "http/api.hpp"

namespace rsc::http {

const std::string& status_page_html() {
  static const std::string page = R"RSCPAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rsc coordinator</title>
<style>
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --mute:#667085; --line:#e3e6eb; --ok:#1a7f4b; --warn:#b25e09; --bad:#b42318; --accent:#2f5bd3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background:var(--bg); color:var(--ink); }
header { display:flex; flex-wrap:wrap; gap:.5rem 1rem; align-items:center; padding:.7rem 1rem; background:#1d2330; color:#fff; }
header h1 { font-size:1.05rem; margin:0; font-weight:600; }
header .grow { flex:1; }
header button { background:transparent; color:#fff; border:1px solid #fff6; border-radius:4px; padding:.2rem .6rem; cursor:pointer; }
#status { font-size:.85rem; opacity:.85; }
main { padding:1rem; max-width:1200px; margin:0 auto; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:.8rem 1rem; margin:0 0 1rem; }
.card h2 { font-size:1rem; margin:0 0 .4rem; }
.card h3 { font-size:.95rem; margin:.8rem 0 .3rem; }
.meta { color:var(--mute); font-size:.85rem; }
.dead { color:var(--bad); font-size:.85rem; font-weight:600; }
.badge { display:inline-block; padding:0 .45rem; border-radius:10px; font-size:.78rem; font-weight:600; color:#fff; background:var(--mute); vertical-align:middle; }
.badge.STABLE, .badge.ACTIVE, .badge.OWNED { background:var(--ok); }
.badge.ASSIGNING, .badge.RECONCILING, .badge.STARTING, .badge.DRAINING, .badge.LEAVING, .badge.REVOKING, .badge.PENDING { background:var(--warn); }
.badge.FENCED, .badge.EXPIRED, .badge.UNASSIGNED { background:var(--bad); }
.scroll { overflow-x:auto; margin:.4rem 0 .6rem; }
table { border-collapse:collapse; width:100%; font-size:.85rem; }
th, td { text-align:left; padding:.25rem .5rem; border-bottom:1px solid var(--line); white-space:nowrap; }
th { color:var(--mute); font-weight:600; }
td.none { color:var(--mute); }
.group { border-top:1px solid var(--line); padding-top:.6rem; margin-top:.6rem; }
ol.events { margin:.2rem 0 0; padding-left:1.2rem; font-size:.82rem; max-height:12rem; overflow-y:auto; }
#login { max-width:420px; margin:3rem auto; }
#login input { width:100%; padding:.5rem; font:inherit; border:1px solid var(--line); border-radius:4px; margin:.5rem 0; }
#login button { padding:.45rem 1rem; font:inherit; background:var(--accent); color:#fff; border:0; border-radius:4px; cursor:pointer; }
.error { color:var(--bad); }
@media (max-width: 640px) { main { padding:.5rem; } .card { padding:.6rem; } th, td { padding:.2rem .3rem; } }
</style>
</head>
<body>
<header>
  <h1>rsc coordinator</h1>
  <span id="status">loading…</span>
  <span class="grow"></span>
  <button id="forget" type="button" hidden>Forget token</button>
</header>
<main>
  <section id="login" class="card" hidden>
    <h2>Sign in</h2>
    <p class="meta">This coordinator needs a bearer token. It is kept in this browser tab only.</p>
    <form id="login-form">
      <label for="token">Token</label>
      <input id="token" type="password" autocomplete="off" required>
      <button type="submit">Show status</button>
      <p id="login-error" class="error"></p>
    </form>
  </section>
  <div id="streams"></div>
</main>
<script>
"use strict";
(function () {
  var params = new URLSearchParams(location.search);
  var refreshMs = Math.max(500, parseInt(params.get("refresh") || "2000", 10) || 2000);
  var KEY = "rsc-token";
  var timer = null;

  function token() { try { return sessionStorage.getItem(KEY) || ""; } catch (e) { return ""; } }
  function el(tag, attrs, kids) {
    var n = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") n.textContent = attrs[k];
      else if (k === "cls") n.className = attrs[k];
      else n.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) n.appendChild(c); });
    return n;
  }
  function cell(v) {
    if (v === null || v === undefined || v === "") return el("td", {cls: "none", text: "—"});
    return el("td", {text: String(v)});
  }
  function age(ms) {
    if (ms === null || ms === undefined) return "—";
    if (ms < 1000) return ms + " ms";
    if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
    return Math.round(ms / 60000) + " min";
  }
  function Unauthorized() {}
  function get(path) {
    var h = {"Accept": "application/json"};
    var t = token();
    if (t) h["Authorization"] = "Bearer " + t;
    return fetch(path, {headers: h, cache: "no-store"}).then(function (r) {
      if (r.status === 401) throw new Unauthorized();
      if (r.status === 404) return null;
      if (!r.ok) return r.text().then(function (b) { throw new Error(path + ": HTTP " + r.status + " " + b); });
      return r.json();
    });
  }
  function enc(s) { return encodeURIComponent(s); }

  function showLogin(message) {
    document.getElementById("streams").replaceChildren();
    document.getElementById("login").hidden = false;
    document.getElementById("forget").hidden = true;
    document.getElementById("login-error").textContent = message || "";
    document.getElementById("status").textContent = "sign in to see the groups";
  }

  // Live members: those whose lease runs (an expired or fenced one is listed for a while, not counted).
  function liveMembers(d) {
    return (d.members || []).filter(function (m) { return m.state !== "EXPIRED" && m.state !== "FENCED"; }).length;
  }
  function gone(d) { return (d.members || []).length - liveMembers(d); }

  function groupView(d) {
    var key = d.streamPrefix + "/" + d.consumerGroup;
    var box = el("div", {cls: "group", "data-group": key, "data-state": d.state});
    box.appendChild(el("h3", null, [
      document.createTextNode(d.consumerGroup + " "),
      el("span", {cls: "badge " + d.state, text: d.state})]));
    box.appendChild(el("div", {cls: "meta", "data-assignor": d.assignor || "uniform", text: "assignor " + (d.assignor || "uniform") +
      (typeof d.crossRackShards === "number" ? " (" + d.crossRackShards + " shard" + (d.crossRackShards === 1 ? "" : "s") + " read across racks)" : "") +
      " · group epoch " + d.groupEpoch + " · assignment epoch " + d.assignmentEpoch +
      " · metadata version " + d.metadataVersion + " · " + d.shardCount + " shards · " + liveMembers(d) + " members" + (gone(d) > 0 ? " (+" + gone(d) + " expired or fenced, kept for a while)" : "")}));
    if (typeof d.deadLetters === "number" && d.deadLetters > 0)
      box.appendChild(el("div", {cls: "dead", "data-dead-letters": String(d.deadLetters),
        text: d.deadLetters + " dead letter" + (d.deadLetters === 1 ? "" : "s") +
              " (records its members gave up on: rsc-admin dead-letters " + d.streamPrefix + " " + d.consumerGroup + ")"}));

    if (d.redisLag) {  // from Redis (XINFO GROUPS), members or not
      var rl = d.redisLag;
      box.appendChild(el("div", {cls: "meta", "data-redis-lag": rl.records === null ? "unknown" : String(rl.records),
        text: "lag " + (rl.records === null ? "unknown on " + rl.unknownShards + " shard" + (rl.unknownShards === 1 ? "" : "s") +
                        " (at least " + rl.knownRecords + ")" : rl.records) +
              " records · " + rl.pending + " delivered, not acked (read from Redis)"}));
    }

    var mt = el("table", {"data-table": "members"}, [el("thead", null, [el("tr", null,
      ["MEMBER", "STATE", "EPOCH", "HEARTBEAT AGE", "CAPACITY", "ASSIGNED", "REVOKING", "WAITING FOR"].map(function (h) { return el("th", {text: h}); }))])]);
    var mb = el("tbody");
    (d.members || []).forEach(function (m) {
      var cap = m.runtimeConsumerCapacity || {};
      var tr = el("tr", {"data-member": m.memberId, "data-state": m.state, "data-instance": m.instanceId || "", "data-rack": m.rackId || ""});
      [cell(m.memberId + (m.instanceId ? " (instance " + m.instanceId + ")" : "") +
            (m.rackId ? " @" + m.rackId + (typeof m.inRackShards === "number" ? " (" + m.inRackShards + " in rack)" : "") : "")), el("td", null, [el("span", {cls: "badge " + m.state, text: m.state})]), cell(m.memberEpoch),
       cell(age(m.lastHeartbeatAgoMs)), cell((cap.availableConcurrency) + "/" + (cap.runtimeMaxConcurrency)),
       cell((m.assignedShards || []).join(",")), cell((m.revokingShards || []).join(",")), cell((m.pendingShards || []).join(","))]
        .forEach(function (c) { tr.appendChild(c); });
      mb.appendChild(tr);
    });
    mt.appendChild(mb);
    box.appendChild(el("div", {cls: "scroll"}, [mt]));
    // Static members away: their shards wait for them (rule 12).
    (d.reservations || []).forEach(function (r) {
      box.appendChild(el("p", {"data-reservation": r.instanceId,
        text: "RESERVED for instance " + r.instanceId + ": shards " + (r.shards || []).join(",") + " (held by " + r.memberId +
              "; rebalanced in " + age(r.endsInMs) + " unless it returns)"}));
    });

    var st = el("table", {"data-table": "shards"}, [el("thead", null, [el("tr", null,
      ["SHARD", "OWNER", "STATE", "PENDING FOR", "PENDING", "LAG", "LAST-DELIVERED-ID", "REDIS: LAG", "REDIS: PENDING", "REDIS: LAST-DELIVERED-ID"].map(function (h) { return el("th", {text: h}); }))])]);
    var sb = el("tbody");
    (d.shards || []).forEach(function (r) {
      var tr = el("tr", {"data-shard": String(r.shardIndex), "data-owner": r.owner || "", "data-state": r.state,
                         "data-pending-for": r.pendingFor || "", "data-revoking-by": r.revokingBy || "",
                         "data-phase": r.phase || "ACTIVE", "data-reserved-for": r.reservedFor || ""});
      // What the shard's member reported, then what Redis holds (members or not; lag may be unknown).
      var rr = r.redis || {};
      var rlag = r.redis ? (rr.lag === null ? "unknown" : rr.lag) : null;
      tr.setAttribute("data-redis-lag", rlag === null ? "" : String(rlag));
      // A shard leaving in a shrink says so, and what it waits for.
      var stateCell = el("td", null, [el("span", {cls: "badge " + r.state, text: r.state})]);
      if (r.phase && r.phase !== "ACTIVE")
        stateCell.appendChild(el("span", {cls: "badge " + r.phase, text: r.phase, title: "waiting for " + (r.waitingFor || "")}));
      [cell(r.shardIndex), cell(r.owner), stateCell,
       cell(r.pendingFor), cell(r.pending), cell(r.lag), cell(r.lastDeliveredId), cell(rlag), cell(rr.pending),
       cell(rr.lastDeliveredId)].forEach(function (c) { tr.appendChild(c); });
      sb.appendChild(tr);
    });
    st.appendChild(sb);
    box.appendChild(el("div", {cls: "scroll"}, [st]));

    var ev = (d.recentEvents || []).slice(-12).reverse();
    if (ev.length) {
      box.appendChild(el("div", {cls: "meta", text: "recent events (this pod, newest first)"}));
      var ol = el("ol", {cls: "events", "data-list": "events"});
      ev.forEach(function (e) {
        var t = age(e.agoMs) + " ago · " + e.kind + (e.memberId ? " " + e.memberId : "") +
                (e.shards ? " [" + e.shards.join(",") + "]" : "") + (e.detail ? " · " + e.detail : "") + " · epoch " + e.groupEpoch;
        ol.appendChild(el("li", {"data-kind": e.kind, text: t}));
      });
      box.appendChild(ol);
    }
    return box;
  }

  function streamView(name, meta, groups, described) {
    var card = el("section", {cls: "card", "data-stream": name});
    card.appendChild(el("h2", {text: name}));
    card.appendChild(el("div", {cls: "meta", text: meta ? meta.shardCount + " shards · key style " + (meta.keyStyle || "—") +
      " · metadata version " + meta.metadataVersion : "no stream metadata"}));
    if (!groups.length) card.appendChild(el("p", {cls: "meta", text: "no consumer groups"}));
    described.forEach(function (d) { if (d) card.appendChild(groupView(d)); });
    return card;
  }

  function load() {
    clearTimeout(timer);
    get("/coord/v1/streams").then(function (list) {
      var names = (list && list.streams) || [];
      return Promise.all(names.map(function (s) {
        return Promise.all([get("/coord/v1/streams/" + enc(s)), get("/coord/v1/streams/" + enc(s) + "/groups")])
          .then(function (r) {
            var groups = (r[1] && r[1].groups) || [];
            return Promise.all(groups.map(function (g) {
              return get("/coord/v1/streams/" + enc(s) + "/groups/" + enc(g));
            })).then(function (ds) { return streamView(s, r[0], groups, ds); });
          });
      }));
    }).then(function (cards) {
      document.getElementById("login").hidden = true;
      document.getElementById("forget").hidden = !token();
      var root = document.getElementById("streams");
      root.replaceChildren.apply(root, cards.length ? cards : [el("p", {cls: "meta", text: "no streams yet"})]);
      document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString() + " · every " + (refreshMs / 1000) + " s";
      timer = setTimeout(load, refreshMs);
    }).catch(function (e) {
      if (e instanceof Unauthorized) return showLogin(token() ? "that token was not accepted" : "");
      document.getElementById("status").textContent = "error: " + e.message + " (retrying)";
      timer = setTimeout(load, refreshMs);
    });
  }

  document.getElementById("login-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    try { sessionStorage.setItem(KEY, document.getElementById("token").value); } catch (e) {}
    document.getElementById("token").value = "";
    load();
  });
  document.getElementById("forget").addEventListener("click", function () {
    try { sessionStorage.removeItem(KEY); } catch (e) {}
    showLogin("");
  });
  load();
})();
</script>
</body>
</html>
)RSCPAGE";
  return page;
}

}  // namespace rsc::http

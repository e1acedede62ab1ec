// Trafka console: a hash-routed page over /api/ (server/http/console/api.py).
// No framework and no build step: the broker ships this file as it is.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const main = () => $("#main");

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}
function nodes(list) { return (list || []).join(", "); }

async function api(path, options = {}) {
  const response = await fetch("/api" + path, {headers: {"content-type": "application/json"}, ...options});
  const body = await response.json().catch(() => ({error: "BAD_RESPONSE", message: response.statusText}));
  if (!response.ok) {
    const error = new Error(`${body.error}: ${body.message}`);
    error.body = body;
    throw error;
  }
  return body;
}

function status(message, ok = false) {
  const box = $("#status");
  box.hidden = !message;
  box.className = ok ? "ok" : "";
  box.textContent = message || "";
}

// ---- confirmation dialog: resolves with the form's values, or null when cancelled ----
function confirmDialog(title, bodyHtml, action, okLabel = "Confirm", style = "danger") {
  const dialog = $("#confirm-dialog");
  $("#confirm-title").textContent = title;
  $("#confirm-body").innerHTML = bodyHtml;
  $("#confirm-error").textContent = "";
  $("#confirm-ok").textContent = okLabel;
  $("#confirm-ok").className = style;  // red for what destroys or rewrites, blue for creating
  dialog.showModal();
  return new Promise(resolve => {
    const ok = async event => {
      event.preventDefault();
      const values = {};
      dialog.querySelectorAll("[name]").forEach(el => { values[el.name] = el.value; });
      try {
        const result = await action(values);
        cleanup(); dialog.close(); resolve(result);
      } catch (error) {
        $("#confirm-error").textContent = error.message;
      }
    };
    const cancel = () => { cleanup(); resolve(null); };
    const cleanup = () => {
      $("#confirm-ok").removeEventListener("click", ok);
      dialog.removeEventListener("close", cancel);
    };
    $("#confirm-ok").addEventListener("click", ok);
    dialog.addEventListener("close", cancel);
  });
}

// ---- live rates: counters sampled every 2 s, differences drawn as SVG lines ----
const RATE_POINTS = 90;
const samples = [];
async function sampleRates() {
  try {
    const now = await api("/rates");
    const last = samples.last;
    if (last) {
      const dt = Math.max(now.time - last.time, 0.001);
      samples.push({time: now.time,
                    messages_in: Math.max(now.messages_in - last.messages_in, 0) / dt,
                    bytes_in: Math.max(now.bytes_in - last.bytes_in, 0) / dt,
                    bytes_out: Math.max(now.bytes_out - last.bytes_out, 0) / dt});
      if (samples.length > RATE_POINTS) samples.shift();
    }
    samples.last = now;
    drawCharts();
  } catch (error) { /* the broker restarting: the next sample tries again */ }
}

function drawChart(svg, series) {
  if (!svg) return;
  const width = 600, height = 140, pad = 4;
  const max = Math.max(1, ...series.flatMap(s => samples.map(p => p[s.key])));
  let out = `<line x1="0" y1="${height - pad}" x2="${width}" y2="${height - pad}" stroke="#e4e7ec"/>`;
  for (const s of series) {
    const points = samples.map((p, i) => {
      const x = (width * (i + RATE_POINTS - samples.length)) / (RATE_POINTS - 1);
      const y = height - pad - ((height - 2 * pad) * p[s.key]) / max;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    out += `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${points.join(" ")}"/>`;
  }
  out += `<text x="4" y="14" font-size="11" fill="#667085">max ${series[0].fmt(Math.round(max))}/s</text>`;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.innerHTML = out;
  svg.dataset.points = samples.length;
  const last = samples[samples.length - 1];
  if (last) {
    svg.dataset.last = series.map(s => Math.round(last[s.key])).join(",");
  }
}

function drawCharts() {
  drawChart($("#chart-messages"), [{key: "messages_in", color: "#1f6feb", fmt: num}]);
  drawChart($("#chart-bytes"), [{key: "bytes_in", color: "#12b76a", fmt: bytes}, {key: "bytes_out", color: "#f79009", fmt: bytes}]);
  const last = samples[samples.length - 1];
  if (last && $("#rate-now")) {
    $("#rate-now").textContent = `${num(Math.round(last.messages_in))} msg/s in · ${bytes(Math.round(last.bytes_in))}/s in · ${bytes(Math.round(last.bytes_out))}/s out`;
  }
}

// ---- pages ----
async function overview() {
  const [cluster, topics, groups] = await Promise.all([api("/cluster"), api("/topics"), api("/groups")]);
  const user = topics.topics.filter(t => !t.internal);
  main().innerHTML = `
    <div class="cards">
      <div class="card">Brokers<b>${cluster.brokers.length}</b></div>
      <div class="card">Controller<b>${cluster.controller_id}</b></div>
      <div class="card">Topics<b>${user.length}</b></div>
      <div class="card">Partitions<b>${num(user.reduce((a, t) => a + t.partitions, 0))}</b></div>
      <div class="card">Consumer groups<b>${groups.groups.length}</b></div>
    </div>
    <h2>Throughput <span class="muted" id="rate-now"></span></h2>
    <div class="charts">
      <div class="chart"><div class="legend"><span><i style="background:#1f6feb"></i>messages in /s</span></div><svg id="chart-messages"></svg></div>
      <div class="chart"><div class="legend"><span><i style="background:#12b76a"></i>bytes in /s</span><span><i style="background:#f79009"></i>bytes out /s</span></div><svg id="chart-bytes"></svg></div>
    </div>
    <h2>Brokers <span class="muted">(${esc(cluster.mode === "zookeeper" ? "ZooKeeper cluster" : "single broker")})</span></h2>
    <table id="brokers"><tr><th>Id</th><th>Host</th><th>Port</th><th>Rack</th><th>Role</th></tr>
      ${cluster.brokers.map(b => `<tr data-broker="${b.node_id}"><td>${b.node_id}</td><td>${esc(b.host)}</td><td>${b.port}</td>
        <td>${esc(b.rack || "")}</td><td>${b.controller ? '<span class="badge">controller</span> ' : ""}${b.this ? '<span class="badge">this console</span>' : ""}</td></tr>`).join("")}
    </table>
    <h2>Topics</h2>${topicsTable(topics.topics)}`;
  drawCharts();
}

function topicsTable(topics) {
  return `<table id="topics"><tr><th>Name</th><th class="num">Partitions</th><th class="num">Replication</th>
      <th class="num">Under-replicated</th><th class="num">Messages</th><th class="num">Size</th></tr>
    ${topics.map(t => `<tr data-topic="${esc(t.name)}"><td><a href="#/topic/${encodeURIComponent(t.name)}">${esc(t.name)}</a>
      ${t.internal ? '<span class="badge">internal</span>' : ""}</td><td class="num">${t.partitions}</td>
      <td class="num">${t.replication_factor}</td><td class="num">${t.under_replicated ? `<span class="badge bad">${t.under_replicated}</span>` : 0}</td>
      <td class="num">${num(t.messages)}</td><td class="num">${bytes(t.size)}</td></tr>`).join("")}</table>`;
}

async function topicsPage() {
  const topics = await api("/topics");
  main().innerHTML = `<div class="toolbar"><h2 style="margin:0">Topics</h2>
    <button id="create-topic" class="primary">Create topic…</button></div>${topicsTable(topics.topics)}`;
  $("#create-topic").onclick = createTopic;
}

async function createTopic() {
  const created = await confirmDialog("Create topic", `
    <label>Name <input name="name" id="new-topic-name" required></label>
    <label>Partitions <input name="partitions" id="new-topic-partitions" type="number" value="1" min="1"></label>
    <label>Replication factor <input name="replication_factor" id="new-topic-replication" type="number" value="-1"></label>
    <label>Configs, one name=value a line <textarea name="configs" id="new-topic-configs" rows="3" placeholder="cleanup.policy=compact"></textarea></label>`,
    async values => {
      const configs = {};
      for (const line of values.configs.split("\n").map(l => l.trim()).filter(Boolean)) {
        const at = line.indexOf("=");
        if (at < 1) throw new Error(`INVALID_CONFIG: "${line}" is not name=value`);
        configs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      return api("/topics", {method: "POST", body: JSON.stringify({
        name: values.name, partitions: Number(values.partitions), replication_factor: Number(values.replication_factor), configs})});
    }, "Create", "primary");
  if (created) go(`#/topic/${encodeURIComponent(created.name)}`, `Created topic ${created.name} (${created.partitions} partitions)`);
}

async function topicPage(name) {
  const topic = await api(`/topics/${encodeURIComponent(name)}`);
  const configs = Object.entries(topic.configs);
  main().innerHTML = `
    <div class="toolbar"><h2 style="margin:0">Topic ${esc(topic.name)}</h2>
      <a href="#/browse/${encodeURIComponent(name)}/0" id="browse-link">Browse messages</a>
      ${topic.internal ? "" : '<button id="delete-topic" class="danger">Delete topic…</button>'}</div>
    <p class="muted">Topic id ${esc(topic.topic_id)}</p>
    <table id="partitions"><tr><th>Partition</th><th>Leader</th><th>Replicas</th><th>ISR</th><th class="num">Log start</th>
      <th class="num">Log end</th><th class="num">High watermark</th><th class="num">Size</th><th class="num">Segments</th></tr>
      ${topic.partitions.map(p => `<tr data-partition="${p.partition}"><td><a href="#/browse/${encodeURIComponent(name)}/${p.partition}">${p.partition}</a></td>
        <td>${p.leader < 0 ? '<span class="badge bad">none</span>' : p.leader}</td><td>${nodes(p.replicas)}</td>
        <td>${nodes(p.isr)}${p.isr.length < p.replicas.length ? ' <span class="badge bad">under-replicated</span>' : ""}</td>
        <td class="num log-start">${num(p.log_start_offset)}</td><td class="num log-end">${num(p.log_end_offset)}</td>
        <td class="num hw">${num(p.high_watermark)}</td><td class="num">${bytes(p.size)}</td><td class="num">${num(p.segments)}</td></tr>`).join("")}
    </table>
    ${topic.partitions.some(p => !p.local) ? '<p class="muted">Offsets show only for partitions with a replica on this broker.</p>' : ""}
    <h3>Configs overriding the broker's</h3>
    ${configs.length ? `<table id="configs">${configs.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("")}</table>` : '<p class="muted">none</p>'}`;
  const del = $("#delete-topic");
  if (del) del.onclick = async () => {
    const done = await confirmDialog(`Delete topic ${name}?`,
      `<p>Every partition of <b>${esc(name)}</b> and its messages go, and groups' committed offsets for it. This cannot be undone.</p>`,
      () => api(`/topics/${encodeURIComponent(name)}`, {method: "DELETE"}), "Delete");
    if (done) go("#/topics", `Deleted topic ${name}`);
  };
}

function renderField(field, mode) {
  if (field === null || field === undefined) return '<span class="muted">null</span>';
  let shown;
  if (mode === "hex") shown = field.hex.replace(/(..)/g, "$1 ").trim();
  else if (field.avro !== null && field.avro !== undefined && mode !== "text") shown = JSON.stringify(field.avro, null, 2);
  else if (mode === "json" && field.json !== null) shown = JSON.stringify(field.json, null, 2);
  else if (field.text !== null) shown = field.text;
  else shown = field.hex.replace(/(..)/g, "$1 ").trim();
  const note = field.schema_id !== null && mode !== "hex" && mode !== "text" ? `<span class="badge">avro #${field.schema_id}</span>` : "";
  return `${note}<pre>${esc(shown)}${field.truncated ? "…" : ""}</pre>`;
}

let lastRecords = null;
function drawRecords() {
  const mode = $("#mode").value;
  const answer = lastRecords;
  if (!answer) return;
  $("#records-info").textContent = `${answer.records.length} records from offset ${answer.start_offset} ` +
    `(log start ${answer.log_start_offset}, high watermark ${answer.high_watermark})`;
  $("#records").innerHTML = `<tr><th class="num">Offset</th><th>Timestamp</th><th>Key</th><th>Value</th><th>Headers</th></tr>` +
    answer.records.map(r => `<tr data-offset="${r.offset}"><td class="num">${r.offset}</td>
      <td title="${r.timestamp_type}">${new Date(r.timestamp).toISOString()}</td>
      <td class="key">${renderField(r.key, mode)}</td><td class="value">${renderField(r.value, mode)}</td>
      <td class="headers">${r.headers.map(h => `<div><b>${esc(h.key)}</b>: ${renderField(h.value, mode)}</div>`).join("")}</td></tr>`).join("");
}

async function browsePage(name, partition) {
  const topic = await api(`/topics/${encodeURIComponent(name)}`);
  main().innerHTML = `
    <h2>Messages of <a href="#/topic/${encodeURIComponent(name)}">${esc(name)}</a></h2>
    <div class="toolbar">
      <label>Partition <select id="partition">${topic.partitions.map(p => `<option ${p.partition === partition ? "selected" : ""}>${p.partition}</option>`).join("")}</select></label>
      <label>From <select id="from"><option value="offset">offset</option><option value="timestamp">timestamp</option></select></label>
      <label>Offset <input id="offset" type="number" min="0" value="0"></label>
      <label>Timestamp (ISO or ms) <input id="timestamp" placeholder="2026-01-01T00:00:00Z"></label>
      <label>Limit <input id="limit" type="number" min="1" max="200" value="50"></label>
      <label>Show as <select id="mode"><option value="text">text</option><option value="json">JSON</option><option value="hex">hex</option></select></label>
      <button id="browse-go" class="primary">Read</button>
    </div>
    <p class="muted" id="records-info"></p>
    <table id="records"></table>`;
  $("#partition").onchange = () => { location.hash = `#/browse/${encodeURIComponent(name)}/${$("#partition").value}`; };
  $("#mode").onchange = drawRecords;
  $("#timestamp").oninput = () => { $("#from").value = "timestamp"; };
  $("#offset").oninput = () => { $("#from").value = "offset"; };
  const read = async () => {
    const params = new URLSearchParams({limit: $("#limit").value});
    if ($("#from").value === "timestamp") {
      const raw = $("#timestamp").value.trim();
      const ms = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
      if (Number.isNaN(ms)) { status(`"${raw}" is not a timestamp`); return; }
      params.set("timestamp", ms);
    } else params.set("offset", $("#offset").value || 0);
    try {
      lastRecords = await api(`/topics/${encodeURIComponent(name)}/partitions/${$("#partition").value}/records?${params}`);
      status("");
      drawRecords();
    } catch (error) { lastRecords = null; $("#records").innerHTML = ""; $("#records-info").textContent = ""; status(error.message); }
  };
  $("#browse-go").onclick = read;
  await read();
}

async function groupsPage() {
  const groups = await api("/groups");
  main().innerHTML = `<h2>Consumer groups</h2>
    <table id="groups"><tr><th>Group</th><th>Type</th><th>State</th><th class="num">Members</th><th class="num">Lag</th></tr>
    ${groups.groups.map(g => `<tr data-group="${esc(g.group_id)}"><td><a href="#/group/${encodeURIComponent(g.group_id)}">${esc(g.group_id)}</a></td>
      <td>${esc(g.type)}${g.protocol_type && g.protocol_type !== g.type ? ` (${esc(g.protocol_type)})` : ""}</td><td>${esc(g.state)}</td>
      <td class="num">${g.members}</td><td class="num lag">${num(g.lag)}</td></tr>`).join("")}</table>
    ${groups.groups.length ? "" : '<p class="muted">No groups on this broker (in a cluster each broker shows the groups it coordinates).</p>'}`;
}

async function groupPage(groupId) {
  const group = await api(`/groups/${encodeURIComponent(groupId)}`);
  main().innerHTML = `
    <div class="toolbar"><h2 style="margin:0">Group ${esc(group.group_id)}</h2>
      <span class="badge" id="group-state">${esc(group.state)}</span>
      <button id="reset-offsets" class="danger">Reset offsets…</button></div>
    <p class="muted">${esc(group.type)} group${group.protocol ? `, assignor ${esc(group.protocol)}` : ""}</p>
    <h3>Members</h3>
    <table id="members"><tr><th>Member</th><th>Client</th><th>Host</th><th>Assigned partitions</th></tr>
      ${group.members.map(m => `<tr><td>${esc(m.member_id)}${m.instance_id ? ` <span class="badge">${esc(m.instance_id)}</span>` : ""}</td>
        <td>${esc(m.client_id)}</td><td>${esc(m.client_host)}</td>
        <td>${m.assignment.map(a => `${esc(a.topic)}: ${a.partitions.join(", ")}`).join("<br>")}</td></tr>`).join("")}
    </table>
    ${group.members.length ? "" : '<p class="muted">No active members.</p>'}
    <h3>Committed offsets</h3>
    <table id="offsets"><tr><th>Topic</th><th class="num">Partition</th><th class="num">Committed</th><th class="num">High watermark</th><th class="num">Lag</th></tr>
      ${group.offsets.map(o => `<tr data-tp="${esc(o.topic)}-${o.partition}"><td>${esc(o.topic)}</td><td class="num">${o.partition}</td>
        <td class="num committed">${num(o.committed)}</td><td class="num">${num(o.high_watermark)}</td><td class="num lag">${num(o.lag)}</td></tr>`).join("")}
    </table>`;
  $("#reset-offsets").onclick = async () => {
    const done = await confirmDialog(`Reset offsets of ${groupId}?`, `
      <p>Commits new offsets for the group. Kafka allows it only while the group has no active members.</p>
      <label>To <select name="to" id="reset-to"><option value="earliest">earliest</option><option value="latest">latest</option><option value="offset">offset</option></select></label>
      <label>Offset (for "offset") <input name="offset" id="reset-offset" type="number" min="0" value="0"></label>
      <label>Topic (empty: every partition with a committed offset) <input name="topic" id="reset-topic"></label>`,
      values => api(`/groups/${encodeURIComponent(groupId)}/reset-offsets`, {method: "POST", body: JSON.stringify({
        to: values.to, offset: values.to === "offset" ? Number(values.offset) : undefined, topic: values.topic || undefined})}),
      "Reset");
    if (done) { status(`Reset ${done.offsets.length} offsets of ${groupId}`, true); route(); }
  };
}

// ---- routing ----
async function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = parts[0] || "overview";
  document.querySelectorAll("[data-nav]").forEach(a => a.classList.toggle("active",
    a.dataset.nav === page || (a.dataset.nav === "topics" && ["topic", "browse"].includes(page)) || (a.dataset.nav === "groups" && page === "group")));
  try {
    if (page === "overview") await overview();
    else if (page === "topics") await topicsPage();
    else if (page === "topic") await topicPage(parts[1]);
    else if (page === "browse") await browsePage(parts[1], Number(parts[2] || 0));
    else if (page === "groups") await groupsPage();
    else if (page === "group") await groupPage(parts[1]);
    else main().innerHTML = "<p>Unknown page.</p>";
    document.body.dataset.page = page;
  } catch (error) {
    main().innerHTML = `<p class="error">${esc(error.message)}</p>`;
  }
}

// A message for the page an action leads to (a hash change clears the previous page's).
let flash = null;
function go(hash, message) { flash = message; location.hash = hash; }
window.addEventListener("hashchange", () => { status(flash || "", Boolean(flash)); flash = null; route(); });
api("/cluster").then(c => { $("#cluster-id").textContent = `cluster ${c.cluster_id} · broker ${c.node_id}`; }).catch(() => {});
route();
sampleRates();
setInterval(sampleRates, 2000);

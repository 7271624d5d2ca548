// anvil ui (docs/ui.md): one page application over one server-sent event stream of rows.
// No framework: the pages are tables and cards rebuilt from the rows when they change,
// at most once a frame. Every string from the API goes in as text, never as HTML.
"use strict";

const kinds = ["pool", "machine", "host", "image", "build", "cluster"];
const rows = Object.fromEntries(kinds.map((k) => [k, new Map()]));
let scope = {};
let current = null; // the mounted page: {update(), unmount()}
let scheduled = false;

// h makes an element: attributes (on* are listeners), then children (strings are text).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const cores = (m) => (m / 1000).toFixed(m % 1000 ? 1 : 0);
const gib = (b) => (b / 2 ** 30).toFixed(b % 2 ** 30 ? 1 : 0);
const shortDigest = (d) => (d ? d.replace(/^sha256:/, "").slice(0, 12) : "");
const byName = (a, b) => (a.namespace || "").localeCompare(b.namespace || "") || a.name.localeCompare(b.name);

function bar(label, used, total, fmt, unit) {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : 0;
  const fill = h("span");
  fill.style.width = `${pct}%`; // through the CSSOM: the page's CSP allows no style attributes
  return h("div", {},
    h("div", { class: "muted" }, `${label}: ${fmt(used)} of ${fmt(total)} ${unit}`),
    h("div", { class: "bar", role: "meter", "aria-label": label, "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": used },
      fill));
}

function health(hl, okText) {
  return hl.ok ? h("span", { class: "ok" }, okText || "Ready")
    : h("span", { class: "bad", title: hl.message || "" }, hl.reason || "not ready", hl.message ? ` — ${hl.message}` : "");
}

function table(headers, body) {
  return h("div", { class: "scroll" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col", class: t.startsWith("~") ? "hide-narrow" : null }, t.replace(/^~/, ""))))),
    h("tbody", {}, body)));
}

// ---- the feed

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("api/feed");
  const apply = (changes) => {
    for (const c of changes) {
      const m = rows[c.kind];
      if (!m) continue;
      if (c.row === null) m.delete(c.key);
      else m.set(c.key, c.row);
    }
    schedule();
  };
  es.addEventListener("snapshot", (e) => {
    for (const m of Object.values(rows)) m.clear();
    apply(JSON.parse(e.data));
    live.textContent = "live";
    live.className = "live on";
    document.body.dataset.synced = "true";
  });
  es.addEventListener("changes", (e) => apply(JSON.parse(e.data)));
  es.onerror = () => {
    const closed = es.readyState === EventSource.CLOSED; // refused: the browser will not retry
    live.textContent = closed ? "disconnected: open the address anvil ui printed" : "reconnecting";
    live.className = "live off";
  };
}

function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    if (current) current.update();
  });
}

// ---- pages

const pages = {};

pages.fleet = (main) => {
  const body = h("div");
  main.append(h("h1", {}, "Fleet"), body);
  return {
    update() {
      const pools = [...rows.pool.values()].sort(byName);
      const machinesOf = new Map();
      for (const m of rows.machine.values()) if (m.pool) machinesOf.set(m.pool, (machinesOf.get(m.pool) || 0) + 1);
      const archs = [...new Set(pools.flatMap((p) => p.architectures.map((a) => a.architecture)))].sort();
      const sections = archs.map((arch) => {
        const of = pools.filter((p) => p.architectures.some((a) => a.architecture === arch));
        const sum = (f) => of.reduce((n, p) => n + f(p), 0);
        const groups = [...new Set(of.map((p) => p.kind || "other"))].sort();
        return h("section", { "data-arch": arch, "aria-label": arch },
          h("h2", {}, arch, " ", h("span", { class: "muted" }, `${of.length} pool${of.length === 1 ? "" : "s"}`)),
          h("div", { class: "totals" },
            bar("CPU", sum((p) => p.cpu.allocated), sum((p) => p.cpu.allocatable), cores, "cores"),
            bar("Memory", sum((p) => p.memory.allocated), sum((p) => p.memory.allocatable), gib, "GiB")),
          h("div", { class: "kinds" }, groups.map((kind) => h("div", { class: "kind" },
            h("h3", {}, kind),
            h("div", { class: "cards" }, of.filter((p) => (p.kind || "other") === kind).map((p) => poolCard(p, arch, machinesOf.get(p.name) || 0)))))));
      });
      const none = pools.filter((p) => p.architectures.length === 0);
      if (none.length) {
        sections.push(h("section", { "data-arch": "" }, h("h2", {}, "No architecture reported yet"),
          h("div", { class: "cards" }, none.map((p) => poolCard(p, "", machinesOf.get(p.name) || 0)))));
      }
      if (!pools.length) sections.push(h("p", { class: "muted" }, scope.pool && scope.pool.why ? scope.pool.why : "No pools."));
      body.replaceChildren(h("p", { class: "muted" }, "A pool of several architectures counts in each."), ...sections);
    },
  };
};

function poolCard(p, arch, machines) {
  const a = p.architectures.find((x) => x.architecture === arch) || {};
  return h("article", { class: "card", "data-pool": p.name, "data-kind": p.kind || "" },
    h("h3", {}, p.name, h("span", {}, h("span", { class: "tag" }, p.kind || "other"), " ",
      a.execution ? h("span", { class: "tag", title: a.reason || "" }, a.execution.toLowerCase()) : null)),
    h("div", {}, health(p.ready), h("span", { class: "muted" }, ` · ${machines} machine${machines === 1 ? "" : "s"}`)),
    bar("CPU", p.cpu.allocated, p.cpu.allocatable, cores, "cores"),
    bar("Memory", p.memory.allocated, p.memory.allocatable, gib, "GiB"));
}

const machineLimit = 500;

pages.machines = (main) => {
  const filters = { namespace: "", state: "", pool: "", architecture: "", image: "" };
  const selects = {};
  const form = h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() });
  for (const f of ["namespace", "state", "pool", "architecture"]) {
    selects[f] = h("select", { name: f, onchange: (e) => { filters[f] = e.target.value; schedule(); } });
    form.append(h("label", {}, f, selects[f]));
  }
  form.append(h("label", {}, "image contains", h("input", { name: "image", type: "search", oninput: (e) => { filters.image = e.target.value; schedule(); } })));
  const count = h("p", { class: "muted", role: "status" });
  const body = h("div");
  main.append(h("h1", {}, "Machines"), form, count, body);
  const fillSelect = (f, values) => {
    const sel = selects[f];
    if (filters[f]) values.add(filters[f]); // the chosen value stays, even when no row has it now
    const want = ["", ...[...values].sort()];
    if (sel.options.length === want.length && [...sel.options].every((o, i) => o.value === want[i])) return;
    sel.replaceChildren(...want.map((v) => h("option", { value: v, selected: v === filters[f] }, v || "all")));
  };
  return {
    update() {
      const all = [...rows.machine.values()];
      for (const f of ["namespace", "state", "pool", "architecture"]) fillSelect(f, new Set(all.map((m) => m[f]).filter(Boolean)));
      const shown = all.filter((m) => ["namespace", "state", "pool", "architecture"].every((f) => !filters[f] || m[f] === filters[f]) &&
        (!filters.image || m.image.includes(filters.image))).sort(byName);
      count.textContent = shown.length > machineLimit
        ? `${shown.length} of ${all.length} machines match; the first ${machineLimit} are shown: narrow the filter.`
        : `${shown.length} of ${all.length} machines`;
      body.replaceChildren(table(["Namespace", "Name", "State", "Pool", "Arch", "~Image", "~Image up to date", "Ready"],
        shown.slice(0, machineLimit).map((m) => h("tr", { "data-machine": `${m.namespace}/${m.name}`, "data-state": m.state },
          h("td", {}, m.namespace),
          h("td", {}, h("a", { href: `#/machine/${encodeURIComponent(m.namespace)}/${encodeURIComponent(m.name)}` }, m.name)),
          h("td", {}, m.state), h("td", {}, m.pool || "—"), h("td", {}, m.architecture),
          h("td", { class: "hide-narrow" }, h("code", {}, m.image)),
          h("td", { class: "hide-narrow" }, m.upToDate || "—"),
          h("td", {}, health(m.ready))))));
    },
  };
};

pages.machine = (main, [ns, name]) => {
  const key = `${ns}/${name}`;
  const details = h("div");
  const events = h("div", {}, h("p", { class: "muted" }, "reading Events…"));
  const log = h("pre", { "aria-label": "console log", tabindex: 0 });
  const logNote = h("p", { class: "muted" });
  const typing = consoleInput(ns, name);
  main.append(h("p", {}, h("a", { href: "#/machines" }, "← Machines")), h("h1", {}, `${ns}/${name}`), details,
    h("h2", {}, "Events"), events, h("h2", {}, "Console"), logNote, log, typing.el);
  const stops = [streamEvents("Machine", ns, name, events), streamLog(ns, name, log, logNote), typing.stop];
  return {
    update() {
      const m = rows.machine.get(key);
      if (!m) {
        details.replaceChildren(h("p", { class: "muted" }, "This Machine is not (or no longer) there, or you may not see it."));
        return;
      }
      details.replaceChildren(
        h("dl", { "data-machine": key, "data-state": m.state },
          h("dt", {}, "State"), h("dd", {}, m.state),
          h("dt", {}, "Ready"), h("dd", {}, health(m.ready)),
          h("dt", {}, "Pool"), h("dd", {}, m.pool || "not scheduled"),
          h("dt", {}, "Architecture"), h("dd", {}, m.architecture),
          h("dt", {}, "Image"), h("dd", {}, h("code", {}, m.image)),
          h("dt", {}, "Booted digest"), h("dd", {}, m.digest ? h("code", {}, m.digest) : "—"),
          h("dt", {}, "Image up to date"), h("dd", {}, m.upToDate || "—"),
          m.cluster ? [h("dt", {}, "Cluster"), h("dd", {}, m.cluster)] : null,
          h("dt", {}, "Created"), h("dd", {}, new Date(m.created).toLocaleString())),
        h("h2", {}, "Conditions"),
        table(["Type", "Status", "Reason", "Message"], (m.conditions || []).map((c) =>
          h("tr", { "data-condition": c.type }, h("td", {}, c.type), h("td", { class: c.status === "True" ? "ok" : "" }, c.status), h("td", {}, c.reason), h("td", {}, c.message || "")))));
    },
    unmount() { stops.forEach((s) => s()); },
  };
};

// streamEvents shows the Events of one object, as they come.
function streamEvents(kind, ns, name, el) {
  const seen = new Map();
  const es = new EventSource(`api/events?kind=${kind}&namespace=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`);
  es.addEventListener("events", (e) => {
    for (const ev of JSON.parse(e.data)) seen.set(`${ev.reason}|${ev.message}`, ev);
    const list = [...seen.values()].sort((a, b) => new Date(b.last) - new Date(a.last));
    el.replaceChildren(list.length ? table(["Last seen", "Type", "Reason", "Message", "~Count", "~From"], list.map((ev) =>
      h("tr", { "data-event-reason": ev.reason }, h("td", {}, new Date(ev.last).toLocaleTimeString()), h("td", { class: ev.type === "Warning" ? "warn" : "" }, ev.type),
        h("td", {}, ev.reason), h("td", {}, ev.message), h("td", { class: "hide-narrow" }, ev.count), h("td", { class: "hide-narrow" }, ev.from))))
      : h("p", { class: "muted" }, "No Events."));
  });
  es.onerror = () => {
    // Refused (403, 400) or the server gone: the browser gives up; say so.
    if (es.readyState === EventSource.CLOSED) el.replaceChildren(h("p", { class: "bad" }, "The Events cannot be read (refused, or anvil ui stopped)."));
  };
  return () => es.close();
}

// streamLog follows a Machine's console log through the console API.
function streamLog(ns, name, pre, note) {
  const ctl = new AbortController();
  const max = 256 * 1024; // what the page keeps of the log: the newest
  fetch(`api/consolelog?namespace=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`, { signal: ctl.signal })
    .then(async (resp) => {
      if (!resp.ok) {
        note.textContent = `The console log cannot be read: ${(await resp.text()).trim()}`;
        return;
      }
      note.textContent = "Its last lines, then what it writes (docs/console.md).";
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        let text = pre.textContent + dec.decode(value, { stream: true });
        if (text.length > max) text = text.slice(text.length - max);
        pre.textContent = text;
        if (atEnd) pre.scrollTop = pre.scrollHeight;
      }
    })
    .catch((e) => { if (e.name !== "AbortError") note.textContent = `The console log stream ended: ${e.message}`; });
  return () => ctl.abort();
}

// consoleInput types lines at a Machine's serial console (one writer at a time: a second
// is refused, docs/console.md); what the console answers shows in the log above it.
function consoleInput(ns, name) {
  let ws = null;
  const status = h("span", { class: "muted", role: "status" }, "Attach to type at the console.");
  const line = h("input", { type: "text", "aria-label": "a line to type at the console", placeholder: "a line; Enter sends it", disabled: true, autocomplete: "off" });
  const button = h("button", { type: "button" }, "Attach");
  const detach = () => { if (ws) ws.close(); };
  button.addEventListener("click", () => {
    if (ws) { detach(); return; }
    const url = new URL(`api/console?namespace=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`, location.href);
    url.protocol = "ws:";
    ws = new WebSocket(url);
    status.textContent = "attaching…";
    ws.onopen = () => {
      status.textContent = "attached: you type at the console";
      line.disabled = false;
      button.textContent = "Detach";
      line.focus();
    };
    ws.onclose = (e) => {
      status.textContent = e.reason ? `detached: ${e.reason}` : "detached";
      line.disabled = true;
      button.textContent = "Attach";
      ws = null;
    };
  });
  const form = h("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(`${line.value}\r`);
    line.value = "";
  } }, button, line, status);
  return { el: form, stop: detach };
}

pages.servers = (main) => {
  const summary = h("p", { class: "muted", role: "status" });
  const body = h("div");
  main.append(h("h1", {}, "Servers"), summary, body);
  return {
    update() {
      const hosts = [...rows.host.values()].sort(byName);
      const states = new Map();
      for (const s of hosts) states.set(s.state || "Unknown", (states.get(s.state || "Unknown") || 0) + 1);
      summary.textContent = hosts.length ? [...states].map(([s, n]) => `${n} ${s}`).join(" · ") : (scope.host && scope.host.why) || "No servers.";
      body.replaceChildren(table(["Namespace", "Name", "Arch", "State", "Power", "Consumer", "~Hardware", "~Wipe", "Ready"],
        hosts.map((s) => h("tr", { "data-host": `${s.namespace}/${s.name}`, "data-state": s.state },
          h("td", {}, s.namespace), h("td", {}, s.name), h("td", {}, s.architecture), h("td", {}, s.state || "—", s.operational && s.operational !== "OK" ? h("span", { class: "bad" }, ` (${s.operational})`) : null),
          h("td", {}, s.power || "—", s.online ? "" : h("span", { class: "muted" }, " (offline)")),
          h("td", {}, s.consumer ? h("a", { href: `#/machine/${s.consumer.split("/").map(encodeURIComponent).join("/")}` }, s.consumer) : "free"),
          h("td", { class: "hide-narrow" }, s.hardware ? `${s.hardware.cpus} CPUs, ${(s.hardware.memoryMiB / 1024).toFixed(1)} GiB, ${s.hardware.disks} disks, ${s.hardware.nics} NICs` : "not inspected"),
          h("td", { class: "hide-narrow" }, s.wipeStarted ? `since ${new Date(s.wipeStarted).toLocaleTimeString()}` : "—"),
          h("td", {}, health(s.ready), s.lastError ? h("div", { class: "bad" }, s.lastError) : null)))));
    },
  };
};

pages.images = (main) => {
  const body = h("div");
  main.append(h("h1", {}, "Image builds and rollouts"), body);
  return {
    update() {
      const images = [...rows.image.values()].sort(byName);
      const builds = [...rows.build.values()];
      body.replaceChildren(...(images.length ? images.map((o) => imageSection(o, builds)) : [h("p", { class: "muted" }, (scope.image && scope.image.why) || "No OSImages.")]));
    },
  };
};

function imageSection(o, builds) {
  const mine = builds.filter((b) => b.namespace === o.namespace && b.osImage === o.name).sort((a, b) => new Date(b.created) - new Date(a.created));
  const latest = mine.find((b) => b.name === o.latestBuild) || mine[0];
  const r = o.rollout;
  return h("section", { class: "card", "data-image": `${o.namespace}/${o.name}` },
    h("h2", {}, `${o.namespace}/${o.name}`, " ", health(o.ready)),
    h("dl", {},
      h("dt", {}, "Output"), h("dd", {}, h("code", {}, o.output)),
      h("dt", {}, "Architectures"), h("dd", {}, o.architectures.join(", ") || "—"),
      h("dt", {}, "Published index"), h("dd", { "data-index": o.index || "" }, o.index ? h("code", {}, o.index) : "not yet"),
      (o.published || []).map((p) => [h("dt", {}, `  ${p.architecture}`), h("dd", {}, h("code", {}, p.digest))])),
    latest ? [h("h3", {}, `Build ${latest.name}`), buildTable(latest)] : h("p", { class: "muted" }, "No build yet."),
    r ? [h("h3", {}, "Rollout"),
      h("p", { "data-rollout": r.state || "" }, r.state || "", r.message ? ` — ${r.message}` : ""),
      bar("Updated", r.updated, r.machines, (n) => n, "machines"),
      h("p", { class: "muted" }, `${r.updated} updated · ${r.updating} updating · ${r.pending} pending of ${r.machines}`)] : null,
    mine.length > 1 ? [h("h3", {}, "Earlier builds"), h("ul", {}, mine.filter((b) => b !== latest).slice(0, 5).map((b) =>
      h("li", {}, b.name, ": ", b.architectures.map((a) => `${a.architecture} ${a.phase}`).join(", "))))] : null);
}

function buildTable(b) {
  return table(["Architecture", "Phase", "~Attempts", "Digest / why"], b.architectures.map((a) =>
    h("tr", { "data-build-arch": a.architecture, "data-phase": a.phase },
      h("td", {}, a.architecture),
      h("td", { class: a.phase === "Failed" ? "bad" : a.phase === "Succeeded" || a.phase === "Reused" ? "ok" : "" }, a.phase),
      h("td", { class: "hide-narrow" }, a.attempts || ""),
      h("td", {}, a.digest ? h("code", {}, shortDigest(a.digest)) : "",
        a.reason ? h("div", {}, `${a.reason}${a.message ? `: ${a.message}` : ""}`) : null,
        a.logTail ? h("pre", {}, a.logTail) : null))));
}

pages.clusters = (main) => {
  const body = h("div");
  main.append(h("h1", {}, "Clusters"), body);
  return {
    update() {
      const clusters = [...rows.cluster.values()].sort(byName);
      const machines = [...rows.machine.values()];
      const named = new Set(clusters.map((c) => `${c.namespace}/${c.name}`));
      body.replaceChildren(...(clusters.length ? clusters.map((c) => {
        // A cluster's anvil Machines are in its namespace, or (through an identityRef) in
        // another one that has no Cluster of that name.
        const mine = machines.filter((m) => m.cluster === c.name &&
          (m.namespace === c.namespace || !named.has(`${m.namespace}/${m.cluster}`))).sort(byName);
        const cells = new Map();
        for (const m of mine) {
          const k = `${m.pool || "unscheduled"}|${m.architecture}`;
          cells.set(k, [...(cells.get(k) || []), m]);
        }
        return h("section", { class: "card", "data-cluster": `${c.namespace}/${c.name}` },
          h("h2", {}, `${c.namespace}/${c.name}`, " ", h("span", { class: "tag" }, c.phase || "—"), " ", health(c.available, "Available")),
          table(["Pool", "Arch", "Machines"], [...cells].sort().map(([k, ms]) => {
            const [pool, arch] = k.split("|");
            return h("tr", {}, h("td", {}, pool), h("td", {}, arch), h("td", {}, ms.map((m, i) =>
              [i ? ", " : "", h("a", { href: `#/machine/${encodeURIComponent(m.namespace)}/${encodeURIComponent(m.name)}` }, m.name), ` (${m.state})`])));
          })));
      }) : [h("p", { class: "muted" }, (scope.cluster && scope.cluster.why) || "No Cluster API clusters.")]));
    },
  };
};

// ---- routing

function route() {
  // Only #/page/... routes: other fragments (the skip link's #main) stay on the page.
  if (location.hash && !location.hash.startsWith("#/")) return;
  const [page, ...args] = (location.hash.replace(/^#\//, "") || "fleet").split("/").map(decodeURIComponent);
  const make = Object.hasOwn(pages, page) ? pages[page] : pages.fleet;
  if (current && current.unmount) current.unmount();
  const main = document.getElementById("main");
  main.replaceChildren();
  current = make(main, args);
  const nav = page === "machine" ? "machines" : page;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `anvil · ${page}`;
  current.update();
}

async function start() {
  const me = await (await fetch("api/me")).json();
  scope = me.scope || {};
  document.getElementById("who").textContent = me.user ? `as ${me.user}` : "";
  for (const a of document.querySelectorAll("nav a[data-kind]")) {
    const s = scope[a.dataset.kind];
    if (!s || !(s.all || (s.namespaces && s.namespaces.length))) a.hidden = true;
  }
  window.addEventListener("hashchange", route);
  route();
  connect();
}

start();

// Yaoyao admin page: what it shows — the banner, the sign-in and admin views, the runner list,
// the confirmation dialog, field errors and the registered-node card.
// Rules: server strings are inserted with textContent only; nothing here calls the server or
// ever receives a runner token (the card shows the commands for a path, never the file).

export const $ = (id) => document.getElementById(id);

// -- messages --------------------------------------------------------------------------------
export function showBanner(text, code, kind) {
  const p = $("banner-text");
  p.textContent = text;
  if (code) {
    const c = document.createElement("code");
    c.textContent = code;
    p.append(" ", c);
  }
  $("banner").classList.toggle("banner-info", kind === "info");
  $("banner").hidden = false;
}
export function hideBanner() { $("banner").hidden = true; $("banner-text").textContent = ""; }

// -- views -----------------------------------------------------------------------------------
export function showLoginView() {
  $("loading").hidden = true;
  $("admin-view").hidden = true;
  $("who").hidden = true;
  $("login-view").hidden = false;
  $("login-password").value = "";
  $("login-user").focus();
}
export function showAdminView(user) {
  $("loading").hidden = true;
  $("login-view").hidden = true;
  $("admin-view").hidden = false;
  $("who").hidden = false;
  $("who-name").textContent = user ? user.name : "";
  $("account-profiles").textContent = user && user.allowedProfiles.length
    ? user.allowedProfiles.join(", ") : "—";
  if (!$("reg-server").value) $("reg-server").value = location.origin;
  updateCommands();
}

// -- the list --------------------------------------------------------------------------------
function sourceName(sources, id) {
  const s = sources.find((x) => x.id === id);
  return s ? `${s.name} (${s.id})` : id;
}
function fact(dl, label, value) {
  const dt = document.createElement("dt"); dt.textContent = label;
  const dd = document.createElement("dd");
  if (value instanceof Node) dd.append(value); else dd.textContent = value;
  dl.append(dt, dd);
}
function chips(items, empty) {
  const wrap = document.createElement("span");
  wrap.className = "chips";
  if (!items.length) { wrap.textContent = empty; return wrap; }
  for (const it of items) {
    const c = document.createElement("span"); c.className = "chip"; c.textContent = it; wrap.append(c);
  }
  return wrap;
}
function badge(text, cls) {
  const b = document.createElement("span"); b.className = `badge ${cls}`; b.textContent = text; return b;
}
export function renderSources(sources) {
  const sel = $("reg-source");
  const keep = sel.value || "local";
  sel.textContent = "";
  for (const s of sources) {
    const o = document.createElement("option");
    o.value = s.id; o.textContent = s.id === "local" ? `${s.name} (this server)` : s.name;
    sel.append(o);
  }
  if (sources.some((s) => s.id === keep)) sel.value = keep;
}
// onDisable(runner) is called when the runner's Disable button is clicked
export function renderRunners(runners, sources, onDisable) {
  const list = $("runner-list");
  const active = document.activeElement;
  const focusId = active && active.dataset ? active.dataset.runnerId : undefined;
  list.textContent = "";
  if (!runners.length) {
    const li = document.createElement("li"); li.className = "empty"; li.textContent = "No execution nodes yet.";
    list.append(li);
  }
  for (const r of runners) {
    const li = document.createElement("li");
    li.className = "runner"; li.dataset.runnerId = r.id;
    const head = document.createElement("div"); head.className = "runner-head";
    const h = document.createElement("h3"); h.className = "runner-name"; h.textContent = r.name;
    head.append(h,
      badge(r.enabled ? "Enabled" : "Disabled", r.enabled ? "badge-enabled" : "badge-disabled"),
      badge(r.online ? "Online" : "Offline", r.online ? "badge-online" : "badge-offline"));
    const dl = document.createElement("dl"); dl.className = "facts";
    fact(dl, "Source", sourceName(sources, r.sourceNodeId));
    fact(dl, "Profiles", chips(r.allowedProfiles, "—"));
    fact(dl, "Features", chips(r.features, "none reported yet"));
    fact(dl, "Registered", new Date(r.createdAt).toLocaleString());
    const idv = document.createElement("span"); idv.className = "mono"; idv.textContent = r.id;
    fact(dl, "Node ID", idv);
    li.append(head, dl);
    if (r.enabled) {
      const actions = document.createElement("div"); actions.className = "actions actions-left";
      const btn = document.createElement("button");
      btn.type = "button"; btn.className = "btn btn-danger"; btn.textContent = "Disable";
      btn.dataset.runnerId = r.id;
      btn.setAttribute("aria-label", `Disable ${r.name}`);
      btn.addEventListener("click", () => onDisable(r));
      actions.append(btn); li.append(actions);
    }
    list.append(li);
  }
  if (focusId) {
    const again = list.querySelector(`button[data-runner-id="${CSS.escape(focusId)}"]`);
    if (again) again.focus();
  }
}

// -- confirmation dialog ---------------------------------------------------------------------
export function confirmDialog(title, text, okLabel) {
  const dlg = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    const done = (value) => {
      $("confirm-ok").removeEventListener("click", onOk);
      $("confirm-cancel").removeEventListener("click", onCancel);
      dlg.removeEventListener("cancel", onCancel);
      if (dlg.open) dlg.close();
      resolve(value);
    };
    const onOk = () => done(true);
    const onCancel = (ev) => { if (ev) ev.preventDefault(); done(false); };
    $("confirm-ok").addEventListener("click", onOk);
    $("confirm-cancel").addEventListener("click", onCancel);
    dlg.addEventListener("cancel", onCancel);
    dlg.showModal();
    $("confirm-cancel").focus();
  });
}

// -- registration form and card --------------------------------------------------------------
export function setFieldError(inputId, message) {
  const input = $(inputId); const err = $(`${inputId}-error`);
  if (message) {
    input.setAttribute("aria-invalid", "true"); err.textContent = message; err.hidden = false;
  } else {
    input.removeAttribute("aria-invalid"); err.textContent = ""; err.hidden = true;
  }
  return !message;
}
export function showConfigCard(runner) {
  $("config-title").textContent = `Node “${runner.name}” registered`;
  $("download-config").disabled = false;
  $("download-actions").hidden = false;
  $("download-done").hidden = true;
  $("config-card").hidden = false;
  updateCommands();
}
export function hideConfigCard() { $("config-card").hidden = true; }
export function showDownloaded() {
  $("download-config").disabled = true;
  $("download-actions").hidden = true;
  $("download-done").hidden = false;
  $("config-path").focus();
}
export function updateCommands() {
  const path = $("config-path").value.trim() || "/full/path/runner.json";
  $("chmod-cmd").textContent = `chmod 600 ${path}`;
  $("start-cmd").textContent = `python -m runner_ref --config ${path}`;
}

// Yaoyao admin page: Settings → Hermes connection → Execution nodes.
// Rules: never put a runner token in the DOM (no text node, no attribute); the token lives in one
// closure variable from the 201 registration response until the single download of runner.json,
// then it is dropped. Server strings are inserted with textContent only.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const LOOPBACK_SERVER = new Set(["127.0.0.1", "localhost", "[::1]"]);
  const LOOPBACK_HERMES = new Set(["127.0.0.1", "[::1]"]);
  const PROFILE_BAD = /[\/\\\u0000-\u001f]/;
  const AUTO_REFRESH_MS = 10000;
  const MESSAGES = {
    runner_source_in_use: "This source already has an enabled execution node. Disable that node before registering a new one.",
    runner_source_invalid: "This source is a paired web node and cannot host an execution node.",
    runner_profile_forbidden: "Invalid profile: one or more profiles are not allowed for your account or for this source.",
    authentication_required: "You are signed out or your session has expired. Sign in again.",
    invalid_assigned_profiles: "Invalid profile: profile names cannot be blank or contain '/', '\\' or control characters.",
    invalid_credentials: "Wrong user name or password.",
    invalid_csrf: "The request was refused: the security token did not match. Reload the page and try again.",
    invalid_origin: "The request was refused because it did not come from this site.",
    admin_required: "Only administrators can manage execution nodes.",
    workspace_not_found: "That node or source no longer exists. The list has been refreshed.",
    network_error: "Cannot reach Yaoyao. Check the connection and try again.",
  };

  const state = { csrf: "", user: null, sources: [], busy: false };
  let pendingConfig = null; // the only place a token ever lives in this page

  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRF-Token"] = state.csrf || "";
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(path, {
        method, headers, credentials: "same-origin", cache: "no-store", redirect: "error",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (_) {
      throw new ApiError(0, "network_error", MESSAGES.network_error);
    }
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    if (!res.ok) {
      const code = (data && typeof data.code === "string") ? data.code : "http_error";
      const msg = (data && typeof data.error === "string") ? data.error : `HTTP ${res.status}`;
      throw new ApiError(res.status, code, msg);
    }
    return data;
  }

  // -- messages ------------------------------------------------------------------------------
  function showBanner(text, code, kind) {
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
  function hideBanner() { $("banner").hidden = true; $("banner-text").textContent = ""; }
  function messageFor(err) {
    if (err.code === "invalid_workspace_request") return `The server refused the form: ${err.message}.`;
    return MESSAGES[err.code] || err.message || "Something went wrong.";
  }
  function handleError(err) {
    if (!(err instanceof ApiError)) { showBanner(String(err && err.message || err), ""); return; }
    if (err.code === "authentication_required") {
      showLogin();
    }
    showBanner(messageFor(err), err.code);
    if (err.code === "workspace_not_found") refresh().catch(() => {});
  }

  // -- views ---------------------------------------------------------------------------------
  function showLogin() {
    state.csrf = ""; state.user = null;
    dropPendingConfig();
    $("loading").hidden = true;
    $("admin-view").hidden = true;
    $("who").hidden = true;
    $("login-view").hidden = false;
    $("login-password").value = "";
    $("login-user").focus();
  }
  function showAdmin() {
    $("loading").hidden = true;
    $("login-view").hidden = true;
    $("admin-view").hidden = false;
    $("who").hidden = false;
    $("who-name").textContent = state.user ? state.user.name : "";
    $("account-profiles").textContent = state.user && state.user.allowedProfiles.length
      ? state.user.allowedProfiles.join(", ") : "—";
    if (!$("reg-server").value) $("reg-server").value = location.origin;
    updateCommands();
  }

  async function boot() {
    try {
      const s = await api("GET", "/api/app/session");
      state.csrf = s.csrfToken; state.user = s.user;
      if (!s.user.isAdmin) { showLogin(); showBanner(MESSAGES.admin_required, "admin_required"); return; }
      showAdmin();
      await refresh();
    } catch (err) {
      showLogin();
      if (err instanceof ApiError && err.code !== "authentication_required") handleError(err);
    }
  }

  // -- login / logout ------------------------------------------------------------------------
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const username = $("login-user").value.trim();
    const password = $("login-password").value;
    if (!username || !password) { showBanner("Enter your user name and password.", ""); return; }
    $("login-submit").disabled = true;
    try {
      const r = await api("POST", "/api/app/login", { username, password });
      $("login-password").value = "";
      state.csrf = r.csrfToken; state.user = r.user;
      hideBanner();
      if (!r.user.isAdmin) { showBanner(MESSAGES.admin_required, "admin_required"); return; }
      showAdmin();
      await refresh();
      $("reg-name").focus();
    } catch (err) {
      handleError(err);
    } finally {
      $("login-submit").disabled = false;
    }
  });

  $("logout").addEventListener("click", async () => {
    try { await api("POST", "/api/app/logout", {}); } catch (_) { /* signed out either way */ }
    showLogin();
    showBanner("Signed out.", "", "info");
  });
  $("banner-close").addEventListener("click", hideBanner);

  // -- the list ------------------------------------------------------------------------------
  function sourceName(id) {
    const s = state.sources.find((x) => x.id === id);
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
  function renderSources(sources) {
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
  function renderRunners(runners) {
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
      fact(dl, "Source", sourceName(r.sourceNodeId));
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
        btn.addEventListener("click", () => confirmDisable(r));
        actions.append(btn); li.append(actions);
      }
      list.append(li);
    }
    if (focusId) {
      const again = list.querySelector(`button[data-runner-id="${CSS.escape(focusId)}"]`);
      if (again) again.focus();
    }
  }

  async function refresh() {
    $("list-status").textContent = "Refreshing…";
    try {
      const data = await api("GET", "/api/app/admin/runners");
      state.sources = data.sources;
      renderSources(data.sources);
      renderRunners(data.runners);
      const online = data.runners.filter((r) => r.online).length;
      $("list-status").textContent =
        `${data.runners.length} node${data.runners.length === 1 ? "" : "s"}, ${online} online · updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      $("list-status").textContent = "";
      throw err;
    }
  }
  $("refresh").addEventListener("click", () => { refresh().catch(handleError); });
  setInterval(() => {
    if (!$("admin-view").hidden && document.visibilityState === "visible" && !$("confirm-dialog").open) {
      refresh().catch(handleError);
    }
  }, AUTO_REFRESH_MS);

  // -- confirmation dialog -------------------------------------------------------------------
  function confirmDialog(title, text, okLabel) {
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

  async function confirmDisable(r) {
    const ok = await confirmDialog(
      `Disable “${r.name}”?`,
      "The node is disconnected at once and refused from now on; its configuration file stops working. This cannot be undone — register a new node to replace it.",
      "Disable node");
    if (!ok) return;
    try {
      await api("DELETE", `/api/app/admin/runners/${encodeURIComponent(r.id)}`);
      showBanner(`“${r.name}” was disabled.`, "", "info");
      await refresh();
    } catch (err) {
      handleError(err);
    }
  }

  // -- registration --------------------------------------------------------------------------
  function setFieldError(inputId, message) {
    const input = $(inputId); const err = $(`${inputId}-error`);
    if (message) {
      input.setAttribute("aria-invalid", "true"); err.textContent = message; err.hidden = false;
    } else {
      input.removeAttribute("aria-invalid"); err.textContent = ""; err.hidden = true;
    }
    return !message;
  }
  function parseURL(raw) {
    try { return new URL(raw.trim()); } catch (_) { return null; }
  }
  function checkServerURL(raw) {
    const u = parseURL(raw);
    if (!u || !raw.trim()) return [null, "Enter a full address such as https://yaoyao.example.com."];
    if (u.protocol !== "http:" && u.protocol !== "https:") return [null, "Use an http:// or https:// address."];
    if (u.username || u.password) return [null, "The address cannot contain a user name or password."];
    if (u.search || u.hash || raw.includes("?") || raw.includes("#") || (u.pathname !== "/" && u.pathname !== ""))
      return [null, "Enter only the origin: no path, query or fragment."];
    if (u.protocol === "http:" && !LOOPBACK_SERVER.has(u.hostname))
      return [null, "A remote node needs HTTPS; plain HTTP only works on this machine (127.0.0.1, localhost, [::1])."];
    return [u.origin, ""];
  }
  function checkHermesURL(raw) {
    const u = parseURL(raw);
    if (!u || !raw.trim()) return [null, "Enter the Hermes address, such as http://127.0.0.1:9119."];
    if (u.protocol !== "http:" && u.protocol !== "https:") return [null, "Use an http:// or https:// address."];
    if (u.username || u.password) return [null, "The address cannot contain a user name or password."];
    if (u.search || u.hash || raw.includes("?") || raw.includes("#")) return [null, "The address cannot have a query or fragment."];
    if (!LOOPBACK_HERMES.has(u.hostname))
      return [null, "Hermes must be on the node's loopback: use 127.0.0.1 or [::1] (not localhost)."];
    const path = u.pathname === "/" ? "" : u.pathname.replace(/\/+$/, "");
    return [u.origin + path, ""];
  }
  function parseProfiles(raw) {
    const out = [];
    for (const part of raw.split(",")) {
      const p = part.trim();
      if (!p) continue;
      if (p.length > 100) return [null, "Each profile name has at most 100 characters."];
      if (PROFILE_BAD.test(p)) return [null, "Profile names cannot contain /, \\ or control characters."];
      if (!out.includes(p)) out.push(p);
    }
    if (!out.length) return [null, "Enter at least one profile."];
    if (out.length > 256) return [null, "At most 256 profiles."];
    return [out, ""];
  }

  $("register-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (state.busy) return;
    hideBanner();
    const name = $("reg-name").value.trim();
    const [profiles, profErr] = parseProfiles($("reg-profiles").value);
    const [serverURL, serverErr] = checkServerURL($("reg-server").value);
    const [hermesURL, hermesErr] = checkHermesURL($("reg-hermes").value);
    const checks = [
      setFieldError("reg-name", name ? (name.length > 100 ? "At most 100 characters." : "") : "Enter a name for the node."),
      setFieldError("reg-profiles", profErr),
      setFieldError("reg-server", serverErr),
      setFieldError("reg-hermes", hermesErr),
    ];
    if (checks.includes(false)) {
      const first = document.querySelector("#register-form [aria-invalid='true']");
      if (first) first.focus();
      return;
    }
    state.busy = true; $("register-submit").disabled = true;
    try {
      const sourceNodeId = $("reg-source").value || "local";
      const r = await api("POST", "/api/app/admin/runners", { name, sourceNodeId, allowedProfiles: profiles });
      pendingConfig = {
        protocol: 1,
        serverURL,
        runnerId: r.runner.id,
        token: r.token,
        hermesURL,
        allowedProfiles: r.runner.allowedProfiles,
        artifactRoots: [],
      };
      showConfigCard(r.runner);
      $("register-form").reset();
      $("reg-server").value = location.origin;
      await refresh().catch(handleError);
      $("download-config").focus();
    } catch (err) {
      handleError(err);
    } finally {
      state.busy = false; $("register-submit").disabled = false;
    }
  });

  function showConfigCard(runner) {
    $("config-title").textContent = `Node “${runner.name}” registered`;
    $("download-config").disabled = false;
    $("download-actions").hidden = false;
    $("download-done").hidden = true;
    $("config-card").hidden = false;
    updateCommands();
  }
  function dropPendingConfig() {
    pendingConfig = null;
    $("config-card").hidden = true;
  }
  function updateCommands() {
    const path = $("config-path").value.trim() || "/full/path/runner.json";
    $("chmod-cmd").textContent = `chmod 600 ${path}`;
    $("start-cmd").textContent = `python -m runner_ref --config ${path}`;
  }
  $("config-path").addEventListener("input", updateCommands);

  $("download-config").addEventListener("click", () => {
    if (!pendingConfig) return;
    let text = JSON.stringify(pendingConfig, null, 2) + "\n";
    pendingConfig = null; // one download only: the token is gone from this page after this
    const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    text = "";
    const a = document.createElement("a");
    a.href = url; a.download = "runner.json"; a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
    $("download-config").disabled = true;
    $("download-actions").hidden = true;
    $("download-done").hidden = false;
    $("config-path").focus();
  });

  $("config-done").addEventListener("click", async () => {
    if (pendingConfig) {
      const ok = await confirmDialog("Close without downloading?",
        "runner.json has not been downloaded. Its token cannot be shown again; you would have to disable this node and register a new one.",
        "Close anyway");
      if (!ok) return;
    }
    dropPendingConfig();
    $("reg-name").focus();
  });

  boot();
})();

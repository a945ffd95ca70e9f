// Lakehouse console: the key page (admin keys only; the nav link is hidden for others and
// the API refuses them anyway). Lists keys (never a secret: the API has none to give),
// creates one and shows its secret once (kept in no storage, gone when the page is left),
// revokes. Loaded before app.js, whose helpers (api, el, $, showStatus, showError) it calls
// only once the page has started. Key names are shown with textContent, like every text.
"use strict";

const KEY_ACTIONS = ["search", "read", "write", "feedback", "admin"];

// An RFC 3339 time from the API (any offset) as "2026-11-26 09:02 UTC".
function when(value) {
  const time = value ? new Date(value) : null;
  if (!time || Number.isNaN(time.getTime())) return "–";
  const iso = time.toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

async function showKeys() {
  const status = $("keys-status");
  showStatus(status, "loading…");
  try {
    const out = await api("GET", "/v1/keys");
    const keys = out.keys || [];
    $("keys-table").querySelector("tbody").replaceChildren(...keys.map((k) => el("tr",
      { dataset: { key: k.id } },
      el("td", {}, el("code", {}, k.id)),
      el("td", { className: "key-name" }, k.name),
      el("td", {}, (k.actions || []).join(", ")),
      el("td", {}, (k.corpora || []).join(", ")),
      el("td", { className: "when" }, when(k.expires_at)),
      el("td", { className: "when" }, when(k.created_at)),
      el("td", { className: "when" }, when(k.last_used_at)),
      el("td", {}, el("button", {
        type: "button", className: "revoke", onclick: () => revokeKey(k.id, k.name),
      }, "Revoke")))));
    showStatus(status, keys.length ? `${keys.length} keys` : "no keys yet");
  } catch (err) {
    showError(status, err);
  }
}

async function createKey(event) {
  event.preventDefault();
  const status = $("key-create-status");
  const body = {
    name: $("key-name").value.trim(),
    actions: [...document.querySelectorAll('#key-actions input[name="action"]:checked')].map((i) => i.value),
    corpora: $("key-corpora").value.split(/[\s,]+/).filter(Boolean),
  };
  if ($("key-expires").value) body.expires_at = new Date($("key-expires").value).toISOString();
  try {
    const created = await api("POST", "/v1/keys", body);
    // The secret exists here only: not in storage, not in the list, gone with the page.
    $("key-secret").textContent = created.key;
    $("key-secret-id").textContent = created.id;
    $("key-created").hidden = false;
    $("key-form").reset();
    showStatus(status, "");
    await showKeys();
  } catch (err) {
    showError(status, err);
  }
}

async function revokeKey(id, name) {
  if (!window.confirm(`Revoke key ${id} (${name})? Whatever uses it stops working.`)) return;
  try {
    await api("DELETE", `/v1/keys/${encodeURIComponent(id)}`);
    showStatus($("keys-status"), `revoked ${id}`);
    await showKeys();
  } catch (err) {
    showError($("keys-status"), err);
  }
}

// Leaving the page forgets a secret shown there.
function hideSecret() {
  $("key-secret").textContent = "";
  $("key-secret-id").textContent = "";
  $("key-created").hidden = true;
}

function initKeys() {
  $("key-actions").replaceChildren(...KEY_ACTIONS.map((a) => el("label", {},
    el("input", {
      type: "checkbox", name: "action", value: a, defaultChecked: a === "search",
    }), ` ${a} `)));
  $("key-form").addEventListener("submit", createKey);
}

// Small behaviours that make the pages calmer; every page works without them.
(function () {
  "use strict";

  // Toasts: dismiss on ✕, fade on their own after a while unless they are errors.
  function wireToasts(root) {
    root.querySelectorAll(".toast:not([data-wired])").forEach(function (toast) {
      toast.setAttribute("data-wired", "");
      var close = toast.querySelector("[data-dismiss]");
      if (close) close.addEventListener("click", function () { toast.remove(); });
      if (!toast.classList.contains("error")) {
        setTimeout(function () { toast.classList.add("leaving"); }, 6000);
        setTimeout(function () { toast.remove(); }, 6600);
      }
    });
  }

  // Rows that offer Undo for a few seconds, then leave: data-remove-after="8000".
  function wireExpiring(root) {
    root.querySelectorAll("[data-remove-after]:not([data-wired])").forEach(function (row) {
      row.setAttribute("data-wired", "");
      var after = parseInt(row.getAttribute("data-remove-after"), 10) || 8000;
      setTimeout(function () { row.classList.add("leaving"); }, after);
      setTimeout(function () { if (row.isConnected && row.classList.contains("leaving")) row.remove(); }, after + 700);
    });
  }

  // A banner (a finished pass's outcome) goes when its ✕ is pressed. No inline handlers: the
  // Content-Security-Policy forbids them.
  document.addEventListener("click", function (event) {
    var close = event.target.closest && event.target.closest(".banner [data-dismiss]");
    if (close) close.closest(".banner").remove();
  });

  // The header's Menu (a <details>, which opens without JavaScript) closes on a click elsewhere
  // and on Escape, as a menu does.
  document.addEventListener("click", function (event) {
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.removeAttribute("open");
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      menu.removeAttribute("open");
      var summary = menu.querySelector("summary");
      if (summary) summary.focus();
    });
  });

  document.addEventListener("DOMContentLoaded", function () { wireToasts(document); wireExpiring(document); });
  document.addEventListener("htmx:load", function () { wireToasts(document); wireExpiring(document); });

  // A form sent without its CSRF cookie (cookies cleared, or gone with the session) is refused
  // before anything knows who is asking, and htmx would do nothing at all. Load the page afresh:
  // it asks for a sign-in if the session went too, and brings a new token either way.
  document.body && document.body.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status === 403 && /CSRF/.test(xhr.responseText)) window.location.reload();
  });

  // A choice that is the whole form (the memory picker) applies as soon as it is made; the
  // form's own button does the same without JavaScript.
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.matches && field.matches("[data-autosubmit]") && field.form) field.form.submit();
  });

  // "Where it came from" opens a conversation at the turn that taught the fact.
  var taught = document.querySelector(".turn.taught");
  if (taught) taught.scrollIntoView({ block: "center" });

  // A server-side event can ask for a toast: HX-Trigger: {"showToast": {"text": "...", "level": "success"}}
  // One toast at a time: a newer one replaces the one showing. The box sits in the page's flow
  // under the header, so a toast never covers a button.
  document.body && document.body.addEventListener("showToast", function (event) {
    var box = document.getElementById("toasts");
    if (!box) return;
    while (box.firstChild) box.removeChild(box.firstChild);
    var toast = document.createElement("div");
    toast.className = "toast " + (event.detail.level || "info");
    toast.setAttribute("role", "status");
    var text = document.createElement("span");
    text.textContent = event.detail.text || event.detail.value || "";
    var close = document.createElement("button");
    close.type = "button"; close.className = "toast-close"; close.textContent = "✕";
    close.setAttribute("aria-label", "Dismiss"); close.setAttribute("data-dismiss", "");
    toast.appendChild(text); toast.appendChild(close);
    box.appendChild(toast);
    wireToasts(box);
  });
})();

// needle-sw.js: the optional service worker that lets a second visit work with the network off
// (`<needle-search offline>` registers it with the site root as its scope, which needs the
// response header `Service-Worker-Allowed: /` on this file — `needle serve` sends it — or a
// copy of this file at the site root).
// Hashed bundle files are immutable: cache first. Everything else (pages, needle.js,
// widget.js, manifest.json, the site's CSS): network first, the cached copy when offline.
// Only same-origin GET requests are touched.

const BUNDLE_CACHE = "needle-v1"; // shared with needle.js, which caches the hashed files itself
const PAGE_CACHE = "needle-pages-v1";
const HASHED = /\.[0-9a-f]{16}\.[a-z0-9]+$/;

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

self.addEventListener("message", (e) => {
  if (e.data?.type !== "needle:cache") return;
  // The page's own URL and what it loaded before this worker controlled it.
  const urls = (e.data.urls ?? []).filter((u) => new URL(u).origin === self.location.origin);
  e.waitUntil(
    (async () => {
      const cache = await caches.open(PAGE_CACHE);
      await Promise.all(
        urls.map(async (u) => {
          const key = u.split("#")[0];
          if (HASHED.test(new URL(key).pathname) || (await cache.match(key))) return;
          try {
            const res = await fetch(key, { cache: "no-cache" });
            if (res.ok) await cache.put(key, res);
          } catch {}
        }),
      );
      e.source?.postMessage({ type: "needle:cached", count: urls.length });
    })(),
  );
});

self.addEventListener("fetch", (e) => {
  const req = e.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (HASHED.test(url.pathname)) e.respondWith(cacheFirst(e));
  else e.respondWith(networkFirst(e));
});

/**
 * Keeps a copy of `res` in `cacheName` while the page reads it: the clone tees the body, so the
 * response goes out at once and its bytes stream to the page as they arrive (a 17 MB engine is
 * not held back until the cache has written it).
 */
function keep(e, cacheName, res) {
  const copy = res.clone();
  e.waitUntil(caches.open(cacheName).then((cache) => cache.put(e.request, copy)).catch(() => {}));
  return res;
}

async function cacheFirst(e) {
  const hit = await caches.match(e.request, { ignoreSearch: true });
  if (hit) return hit;
  const res = await fetch(e.request);
  return res.ok ? keep(e, BUNDLE_CACHE, res) : res;
}

async function networkFirst(e) {
  const req = e.request;
  try {
    const res = await fetch(req);
    return res.ok && res.type === "basic" ? keep(e, PAGE_CACHE, res) : res;
  } catch (err) {
    const hit = await caches.match(req, { ignoreSearch: req.mode === "navigate" });
    if (hit) return hit;
    throw err;
  }
}

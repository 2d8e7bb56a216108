// The engine's thread: needle.js's core behind postMessage, so the page never blocks on the
// model or a query.
import { serveWorker } from "./needle.js";
serveWorker(self);

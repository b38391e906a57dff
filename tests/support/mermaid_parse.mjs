// Mermaid's own parser under Node: each diagram of a JSON array on stdin, parsed as mermaid.js
// parses it before rendering (the `mermaid` package of package.json, with `securityLevel:
// "strict"`, GitHub's setting), answered on stdout as one JSON array of
// {ok, type, error, nodes: {id: label}, edges: [[from, to, label]]} (nodes and edges for a
// flowchart: what the parser understood, not what the text looks like).
//
// Mermaid sanitises labels with DOMPurify, which needs a DOM: linkedom's (8 MB) stands in for
// the browser's. Nothing is rendered (no layout, no browser).
import { parseHTML } from "linkedom";

const { window } = parseHTML("<!doctype html><html><body></body></html>");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const diagrams = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const results = [];
for (const text of diagrams) {
  try {
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    const result = { ok: true, type: diagram.type, error: null, nodes: {}, edges: [] };
    if (typeof diagram.db.getVertices === "function") {
      for (const [id, vertex] of diagram.db.getVertices()) result.nodes[id] = vertex.text;
      result.edges = diagram.db.getEdges().map((e) => [e.start, e.end, e.text]);
    }
    results.push(result);
  } catch (error) {
    results.push({ ok: false, type: null, error: String(error?.message ?? error), nodes: {}, edges: [] });
  }
}
process.stdout.write(JSON.stringify(results));

// The check-sender trigger of the Node sender (sender.js): asks its test API to emit one event to
// $HOOKPROOF_TARGET_URL and exits 0 once the API accepted it (202), non-zero otherwise.
//
//   node trigger.js http://127.0.0.1:<port>/v/<variant>/messages
"use strict";

const http = require("node:http");

const [api] = process.argv.slice(2);
const target = process.env.HOOKPROOF_TARGET_URL;
if (!api || !target) {
  process.stderr.write("usage: HOOKPROOF_TARGET_URL=... node trigger.js <messages API URL>\n");
  process.exit(2);
}
const body = JSON.stringify({ url: target, type: "test.ping", data: { note: "héllo" } });
const req = http.request(api, {
  method: "POST",
  headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
});
req.on("response", (res) => {
  const chunks = [];
  res.on("data", (chunk) => chunks.push(chunk));
  res.on("end", () => {
    if (res.statusCode === 202) process.exit(0);
    process.stderr.write(`the sender's API answered ${res.statusCode}: ${Buffer.concat(chunks)}\n`);
    process.exit(1);
  });
});
req.on("error", (error) => {
  process.stderr.write(`the sender's API is unreachable: ${error.message}\n`);
  process.exit(1);
});
req.end(body);

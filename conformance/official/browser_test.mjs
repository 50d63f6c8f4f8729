// The browser side of client_sdk_test.py: serves the test page (browser_entry.mjs
// bundled) from a test HTTP server of its own on 127.0.0.1 (another origin than
// flagsync's, so every request to flagsync is a CORS request), opens it in headless
// Chromium through playwright-core, and runs LaunchDarkly's browser SDK and
// OpenFeature's OFREP web provider there.
//
//     node browser_test.mjs CONFIG_JSON
//
// CONFIG_JSON: {"sdkDir": folder whose node_modules holds playwright-core, "bundle":
// the bundled page script, "chromium": the browser's path, "dataPath": serve's data
// file, "edits": [data for the browser SDK's edit, data for the OFREP edit],
// "ld": {url, envId, contexts, hashes, streaming, editedFlag, before},
// "secure": {url, envId, contexts, good: [hash…], bad: [hash…]},
// "ofrep": {url, sdkKey, context, flags: {key: type}}}.
//
// Prints one JSON line with what each part saw, or {"error"} and exits 1.

import { createRequire } from 'node:module';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const config = JSON.parse(process.argv[2]);
const require = createRequire(path.join(config.sdkDir, 'package.json'));
const { chromium } = require('playwright-core');

const CHANGE_TIMEOUT_MS = 5000;

function edit(data) {
  const tmp = `${config.dataPath}.tmp`;
  writeFileSync(tmp, JSON.stringify(data));
  renameSync(tmp, config.dataPath);
}

/** The page and its script, on a port of its own. */
function servePage() {
  const bundle = readFileSync(config.bundle);
  const page = '<!doctype html><html><head><meta charset="utf-8"><title>flagsync browser test</title>'
    + '<script src="/bundle.js"></script></head><body>flagsync</body></html>';
  const server = http.createServer((req, res) => {
    if (req.url === '/bundle.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(bundle);
    } else if (req.url === '/' || req.url === '/index.html') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(page);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** Wait until `name` on the page's window is set; its value minus `since`, in ms. */
async function waitFor(page, name, since) {
  const deadline = Date.now() + CHANGE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const at = await page.evaluate((n) => window[n], name);
    if (at !== null && at !== undefined) return at - since;
    await new Promise((r) => setTimeout(r, 20));
  }
  return null;
}

async function main() {
  const server = await servePage();
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: config.chromium,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const out = { origin, console: [] };
  try {
    const page = await browser.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') out.console.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => out.console.push(`pageerror: ${e}`));
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => window.flagsyncReady === true);

    // LaunchDarkly's browser SDK: values, then an edit seen by its change listener.
    out.ld = await page.evaluate((c) => window.flagsyncTest.ld(c), config.ld);
    // Only a change after the edit counts (starting may report changes of its own).
    const t0 = await page.evaluate(() => {
      window.flagsyncChangeAt = null;
      return performance.now();
    });
    edit(config.edits[0]);
    out.ld.changeMs = await waitFor(page, 'flagsyncChangeAt', t0);
    out.ld.valuesAfter = await page.evaluate((c) => window.flagsyncTest.ldAfter(c), config.ld);
    await page.evaluate(() => window.flagsyncTest.ldClose());

    // Secure mode: the right hash starts, a wrong one does not.
    const secure = config.secure;
    out.secureGood = await page.evaluate((c) => window.flagsyncTest.ld(c),
      { ...secure, hashes: secure.good, streaming: false, editedFlag: config.ld.editedFlag });
    await page.evaluate(() => window.flagsyncTest.ldClose());
    out.secureBad = await page.evaluate((c) => window.flagsyncTest.ld(c),
      { ...secure, hashes: secure.bad, streaming: false, editedFlag: config.ld.editedFlag });
    await page.evaluate(() => window.flagsyncTest.ldClose());

    // OFREP, polling: the provider's second bulk request names the first one's ETag
    // and gets 304.
    const ofrep = config.ofrep;
    out.ofrepPolling = await page.evaluate((c) => window.flagsyncTest.ofrep(c),
      { ...ofrep, changeDetection: 'polling', pollInterval: 300 });
    await new Promise((r) => setTimeout(r, 1200));
    out.ofrepRequests = await page.evaluate(() => window.flagsyncTest.ofrepRequests());
    await page.evaluate(() => window.flagsyncTest.ofrepClose());

    // OFREP with the bulk response's event stream: an edit reaches the provider.
    const page2 = await browser.newPage();
    page2.on('console', (m) => {
      if (m.type() === 'error') out.console.push(`error: ${m.text()}`);
    });
    await page2.goto(`${origin}/`);
    await page2.waitForFunction(() => window.flagsyncReady === true);
    out.ofrep = await page2.evaluate((c) => window.flagsyncTest.ofrep(c),
      { ...ofrep, changeDetection: 'sse', pollInterval: 0 });
    // The provider opens the bulk response's event stream: wait until it is open, so
    // that the edit's notice comes through it.
    await page2.waitForFunction(() => window.flagsyncStreamsOpen > 0, null, { timeout: CHANGE_TIMEOUT_MS });
    const t1 = await page2.evaluate(() => {
      window.flagsyncOfrepChangeAt = null;
      return performance.now();
    });
    edit(config.edits[1]);
    out.ofrepChangeMs = await waitFor(page2, 'flagsyncOfrepChangeAt', t1);
    out.ofrepAfter = await page2.evaluate((c) => window.flagsyncTest.ofrepDetails(c), ofrep);
    await page2.evaluate(() => window.flagsyncTest.ofrepClose());
  } finally {
    await browser.close();
    server.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});

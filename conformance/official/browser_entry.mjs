// The test page's script (bundled by esbuild into one file by client_sdk_test.py):
// LaunchDarkly's browser SDK (@launchdarkly/js-client-sdk) and OpenFeature's web SDK
// with its OFREP provider (@openfeature/ofrep-web-provider), run in headless Chromium
// by browser_test.mjs against flagsync on another origin than the page's.
//
// Everything is reached through `window.flagsyncTest`; each call resolves with plain
// JSON for the runner to check.

import { createClient } from '@launchdarkly/js-client-sdk';
import { OpenFeature, ProviderEvents } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

const ldClients = [];
// The bulk evaluation requests the OFREP provider made: [status, If-None-Match sent].
const ofrepRequests = [];
const realFetch = window.fetch.bind(window);
window.fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input.url;
  const response = await realFetch(input, init);
  if (url.includes('/ofrep/v1/evaluate/flags') && !url.includes('/flags/')) {
    const headers = new Headers((init && init.headers) || (typeof input === 'string' ? {} : input.headers));
    ofrepRequests.push([response.status, headers.get('If-None-Match')]);
  }
  return response;
};

// The change-notice streams the OFREP provider opens: how many are open now.
window.flagsyncStreamsOpen = 0;
const RealEventSource = window.EventSource;
window.EventSource = class extends RealEventSource {
  constructor(url, init) {
    super(url, init);
    let open = false;
    this.addEventListener('open', () => {
      if (!open) window.flagsyncStreamsOpen += 1;
      open = true;
    });
    this.addEventListener('error', () => {
      if (open) window.flagsyncStreamsOpen -= 1;
      open = false;
    });
  }
};

function ldOptions(config) {
  return {
    baseUri: config.url,
    streamUri: config.url,
    eventsUri: config.url,
    streaming: config.streaming,
    flushInterval: 100000,
    logger: { debug() {}, info() {}, warn: (m) => console.warn(m), error: (m) => console.error(m) },
  };
}

/** Start a browser SDK client per context; their flags, and how long the slowest took. */
async function ld(config) {
  const out = { values: [], initMs: 0, statuses: [] };
  window.flagsyncChangeAt = null;
  for (let i = 0; i < config.contexts.length; i += 1) {
    const started = performance.now();
    const client = createClient(config.envId, config.contexts[i], ldOptions(config));
    const hash = config.hashes ? config.hashes[i] : undefined;
    if (i === 0) {
      client.on(`change:${config.editedFlag}`, () => {
        if (window.flagsyncChangeAt === null) window.flagsyncChangeAt = performance.now();
      });
    }
    const result = await client.start(hash ? { identifyOptions: { hash } } : undefined);
    out.statuses.push(result.status);
    if (result.status !== 'complete') {
      await client.close();
      continue;
    }
    ldClients.push(client);
    out.initMs = Math.max(out.initMs, performance.now() - started);
    out.values.push(client.allFlags());
    client.variation(config.editedFlag, null);
    client.track('flagsync-browser-custom', { n: i }, 2.5);
  }
  return out;
}

/** The flags of every started client, after an edit, once each saw it (or 5 s). */
async function ldAfter(config) {
  const deadline = performance.now() + 5000;
  const values = [];
  for (const client of ldClients) {
    while (JSON.stringify(client.variation(config.editedFlag, null)) === JSON.stringify(config.before)
      && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    values.push(client.allFlags());
  }
  return values;
}

async function ldClose() {
  for (const client of ldClients.splice(0)) {
    await client.flush();
    await client.close();
  }
}

let ofrepClient = null;
window.flagsyncOfrepChangeAt = null;

/** The OFREP provider set up for `config.context`: every flag's details. */
async function ofrep(config) {
  const provider = new OFREPWebProvider({
    baseUrl: config.url,
    headers: [['Authorization', `Bearer ${config.sdkKey}`]],
    pollInterval: config.pollInterval,
    changeDetection: config.changeDetection,
  });
  await OpenFeature.setContext(config.context);
  await OpenFeature.setProviderAndWait(provider);
  ofrepClient = OpenFeature.getClient();
  ofrepClient.addHandler(ProviderEvents.ConfigurationChanged, () => {
    if (window.flagsyncOfrepChangeAt === null) window.flagsyncOfrepChangeAt = performance.now();
  });
  return ofrepDetails(config);
}

function ofrepDetails(config) {
  const details = {};
  for (const [key, type] of Object.entries(config.flags)) {
    let d;
    if (type === 'boolean') d = ofrepClient.getBooleanDetails(key, false);
    else if (type === 'string') d = ofrepClient.getStringDetails(key, '');
    else if (type === 'number') d = ofrepClient.getNumberDetails(key, 0);
    else d = ofrepClient.getObjectDetails(key, {});
    details[key] = { value: d.value, reason: d.reason, variant: d.variant ?? null, errorCode: d.errorCode ?? null };
  }
  return details;
}

async function ofrepClose() {
  await OpenFeature.close();
}

window.flagsyncTest = {
  ld,
  ldAfter,
  ldClose,
  ofrep,
  ofrepDetails,
  ofrepClose,
  ofrepRequests: () => ofrepRequests.slice(),
};
window.flagsyncReady = true;

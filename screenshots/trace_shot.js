// Screenshots a trace viewer page in headless Chromium over the DevTools protocol, optionally
// after a click (to select a slice and show its arguments).
//
//   node --experimental-websocket screenshots/trace_shot.js PAGE OUT.png [WxH] [X,Y]
//
// PAGE is a URL (file:///.../trace.html as catapult's trace2html writes it, or a local
// Perfetto UI). Needs Node 20 or newer (its WebSocket) and Debian's `chromium`. Nothing here
// touches the network: the browser starts with background networking off and a fresh profile.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');

const [page, out, size = '1600x1000', click] = process.argv.slice(2);
if (!page || !out) {
  console.error('usage: trace_shot.js PAGE OUT.png [WxH] [X,Y]');
  process.exit(2);
}
const [width, height] = size.split('x').map(Number);
const port = 9300 + (process.pid % 500);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'trace-shot-'));
const browser = spawn('chromium', [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--no-first-run', '--disable-component-update', '--disable-sync',
  `--user-data-dir=${profile}`, `--remote-debugging-port=${port}`,
  `--window-size=${width},${height}`, 'about:blank',
], { stdio: 'ignore' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function targets() {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/json' }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => { try { resolve(JSON.parse(body)); } catch (e) { reject(e); } });
    }).on('error', reject);
  });
}

async function main() {
  let list = null;
  for (let i = 0; i < 100 && !list; i++) {
    try { list = await targets(); } catch (e) { await sleep(100); }
  }
  if (!list) throw new Error('Chromium did not start');
  const ws = new WebSocket(list.find((t) => t.type === 'page').webSocketDebuggerUrl);
  await new Promise((r) => { ws.onopen = r; });
  let id = 0;
  const waiting = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
  };
  const send = (method, params = {}) => new Promise((r) => {
    id += 1;
    waiting.set(id, r);
    ws.send(JSON.stringify({ id, method, params }));
  });
  await send('Page.enable');
  await send('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
  await send('Page.navigate', { url: page });
  await sleep(6000); // the viewer imports the trace and lays it out
  if (click) {
    const [x, y] = click.split(',').map(Number);
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased']) {
      await send('Input.dispatchMouseEvent', { type, x, y, button: 'left', clickCount: 1 });
      await sleep(150);
    }
    await sleep(1500);
  }
  const shot = await send('Page.captureScreenshot', { format: 'png' });
  fs.writeFileSync(out, Buffer.from(shot.result.data, 'base64'));
  ws.close();
}

main()
  .then(() => { browser.kill(); fs.rmSync(profile, { recursive: true, force: true }); })
  .catch((e) => { console.error(String(e)); browser.kill(); process.exit(1); });

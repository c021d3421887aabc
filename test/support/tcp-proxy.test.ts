import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { it } from 'node:test';
import { TcpProxy } from './tcp-proxy.ts';

// The proxy is the fault injector for every outage test, so its own behaviour is tested here
// against a local echo server.
it('TcpProxy forwards, cuts, hangs, restores and retargets', async () => {
  const echo = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  const echoPort = (echo.address() as { port: number }).port;
  const proxy = await TcpProxy.start({ host: '127.0.0.1', port: echoPort });

  const roundTrip = (socket: Socket, text: string, timeoutMs = 500) =>
    new Promise<string | 'timeout' | 'closed'>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), timeoutMs);
      socket.once('data', (data) => {
        clearTimeout(timer);
        resolve(data.toString());
      });
      socket.once('close', () => {
        clearTimeout(timer);
        resolve('closed');
      });
      socket.write(text);
    });
  const open = () =>
    new Promise<Socket>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: proxy.port }, () => resolve(socket));
      socket.on('error', reject);
    });

  const first = await open();
  assert.equal(await roundTrip(first, 'ping'), 'ping');
  proxy.hang();
  assert.equal(await roundTrip(first, 'lost', 200), 'timeout');
  proxy.cut();
  assert.equal(first.destroyed || (await roundTrip(first, 'x', 200)) === 'closed', true);
  const refused = connect({ host: '127.0.0.1', port: proxy.port });
  const outcome = await new Promise((resolve) => {
    refused.once('close', () => resolve('closed'));
    refused.once('data', () => resolve('data'));
    refused.on('error', () => undefined);
    refused.write('y');
  });
  assert.equal(outcome, 'closed');
  proxy.restore();
  const second = await open();
  assert.equal(await roundTrip(second, 'back'), 'back');
  second.destroy();

  // Retargeted: open connections are dropped, new ones reach the other server.
  const upper = createServer((socket) =>
    socket.on('data', (data) => socket.write(data.toString().toUpperCase())),
  );
  await new Promise<void>((resolve) => upper.listen(0, '127.0.0.1', resolve));
  const third = await open();
  assert.equal(await roundTrip(third, 'old'), 'old');
  proxy.retarget({ host: '127.0.0.1', port: (upper.address() as { port: number }).port });
  assert.equal(third.destroyed || (await roundTrip(third, 'x', 200)) === 'closed', true);
  const fourth = await open();
  assert.equal(await roundTrip(fourth, 'new'), 'NEW');
  fourth.destroy();
  await proxy.close();
  await new Promise<void>((resolve) => echo.close(() => resolve()));
  await new Promise<void>((resolve) => upper.close(() => resolve()));
});

import type { ChildProcess } from 'node:child_process';

/**
 * node:cluster's round-robin handoff (Node 24, lib/internal/cluster/round_robin_handle.js): the
 * supervisor accepts each connection and sends it to one child over IPC (`{ cmd: 'NODE_CLUSTER',
 * act: 'newconn', seq }` with the connection's handle), keeping its own copy open until the child
 * acknowledges it (`{ cmd: 'NODE_CLUSTER', ack: seq }`); then it closes its copy, or passes the
 * connection to another child if this one refused it (a child that closed its server refuses).
 * A child that dies without warning (SIGKILL, an out-of-memory kill, a crash) before it
 * acknowledges never will, and Node forgets the connection without closing it: the client waits,
 * neither served nor refused, until the supervisor exits. Under steady load that is one
 * connection for every child that dies so (a child gets the next connection only once it has
 * acknowledged the last, so never more).
 */
interface NewConnection {
  readonly cmd: 'NODE_CLUSTER';
  readonly act: 'newconn';
  readonly seq: number;
}

interface Acknowledgement {
  readonly cmd: 'NODE_CLUSTER';
  readonly ack: number;
}

interface Closable {
  close(): void;
}

function isNewConnection(message: unknown): message is NewConnection {
  const m = message as Partial<NewConnection> | null;
  return (
    typeof m === 'object' &&
    m !== null &&
    m.cmd === 'NODE_CLUSTER' &&
    m.act === 'newconn' &&
    typeof m.seq === 'number'
  );
}

function isAcknowledgement(message: unknown): message is Acknowledgement {
  const m = message as Partial<Acknowledgement> | null;
  return (
    typeof m === 'object' && m !== null && m.cmd === 'NODE_CLUSTER' && typeof m.ack === 'number'
  );
}

function isClosable(handle: unknown): handle is Closable {
  return (
    typeof handle === 'object' &&
    handle !== null &&
    typeof (handle as Partial<Closable>).close === 'function'
  );
}

/**
 * Closes the connection a child was handed and never acknowledged once the child is gone and its
 * IPC channel read to the end (its last acknowledgement included), so the client sees the
 * connection close at once, as for the connections the dead child held, and retries, instead of
 * waiting for nothing. Nothing was read from such a connection, so no ID was issued on it.
 *
 * It watches the child's side of Node's internal protocol described above: the handoff through
 * `child.send` (the instance's own method, which Node's cluster calls), the acknowledgement
 * through the `internalMessage` event. Should a Node version change that protocol, the guard
 * sees no handoff and does nothing, and test/cli-processes.test.ts, which SIGKILLs children under
 * a stream of new connections and counts the requests left unanswered, fails.
 */
export function guardHandoffs(child: ChildProcess): void {
  const unacknowledged = new Map<number, Closable>();
  const send = child.send.bind(child) as (...args: unknown[]) => boolean;
  child.send = ((...args: unknown[]) => {
    const [message, handle] = args;
    if (isNewConnection(message) && isClosable(handle)) unacknowledged.set(message.seq, handle);
    return send(...args);
  }) as ChildProcess['send'];
  child.on('internalMessage', (message: unknown) => {
    if (isAcknowledgement(message)) unacknowledged.delete(message.ack);
  });
  // 'close', not 'disconnect': Node emits 'disconnect' only once the handles it sent are
  // acknowledged, so never for a child that died with one outstanding. 'close' comes once the
  // child has exited and its channel has been read to the end.
  child.once('close', () => {
    for (const handle of unacknowledged.values()) handle.close();
    unacknowledged.clear();
  });
}

import { SERVICES, hostPort } from './services.ts';

/**
 * Removes what a worker registry URL's cluster left in its coordinator, so tests that use a
 * unique cluster name each leave nothing behind: etcd keys under `/idmint/workers/<name>/`,
 * ZooKeeper nodes under `/snowflake/<name>`.
 */
export async function removeRegistryData(url: string): Promise<void> {
  const match = /^(etcd|zookeeper):\/\/[^/]+\/(.+)$/.exec(url);
  if (match === null) return;
  const [, scheme, name] = match;
  if (scheme === 'etcd') {
    const { Etcd3 } = await import('etcd3');
    const client = new Etcd3({ hosts: SERVICES.etcd.url });
    try {
      await client.delete().prefix(`/idmint/workers/${name}/`);
    } finally {
      client.close();
    }
    return;
  }
  const zookeeper = (await import('node-zookeeper-client')).default;
  const { host, port } = hostPort(SERVICES.zookeeper.url);
  const client = zookeeper.createClient(`${host}:${port}`, { sessionTimeout: 5000 });
  // -101 is NO_NODE: already gone is as good as removed.
  const call = <T>(run: (done: (error: unknown, value?: T) => void) => void) =>
    new Promise<T | undefined>((resolve, reject) =>
      run((error, value) =>
        error === null || error === undefined || (error as { code?: number }).code === -101
          ? resolve(value)
          : reject(error),
      ),
    );
  const remove = async (path: string): Promise<void> => {
    const children =
      (await call<string[]>((done) =>
        client.getChildren(path, (error, list) => done(error, list)),
      )) ?? [];
    for (const child of children) await remove(`${path}/${child}`);
    await call((done) => client.remove(path, -1, (error) => done(error)));
  };
  await new Promise<void>((resolve) => {
    client.once('connected', () => resolve());
    client.connect();
  });
  try {
    await remove(`/snowflake/${name}`);
  } finally {
    client.close();
  }
}

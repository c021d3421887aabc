import { formatMs, formatRate } from '../format.ts';
import type { SnowflakeStatus } from '../../contract/status.ts';
import { RateChart } from './chart.tsx';

const STATUS_TEXT: Readonly<Record<SnowflakeStatus['status'], string>> = {
  active: 'active: issuing IDs',
  fenced: 'fenced: renewals failing, no IDs issued',
  recovering: 'recovering: the lease was lost, a new one is being acquired',
  closed: 'closed',
};

function time(iso: string | null): string {
  return iso === null ? '—' : new Date(iso).toLocaleTimeString();
}

/** The worker's lease, its fence and horizon, the clock against the peers, rollbacks, and IDs/s. */
export function SnowflakePanel(props: {
  readonly snowflake: SnowflakeStatus;
  readonly theme: string;
}) {
  const s = props.snowflake;
  const l = s.layout;
  const peer = s.peerClock;
  const peerText =
    peer === null
      ? 'not checked (peerClockCheck off)'
      : peer.skipped !== null
        ? `skipped: ${peer.skipped}`
        : peer.offsetMs === null
          ? 'no live peers at start-up'
          : `${peer.offsetMs > 0 ? '+' : ''}${peer.offsetMs} ms from ${peer.peers} ` +
            `peer${peer.peers === 1 ? '' : 's'} (limit ${peer.maxPeerSkewMs} ms)`;
  const skewed =
    peer !== null && peer.offsetMs !== null && Math.abs(peer.offsetMs) > peer.maxPeerSkewMs / 2;
  return (
    <section class="panel" aria-labelledby="snowflake-title">
      <h2 id="snowflake-title">
        Snowflake{' '}
        <span class="figure" data-testid="snowflake-rate">
          {formatRate(s.idsPerSecond, ' IDs/s')}
        </span>
      </h2>
      <dl class="facts">
        <dt>Worker</dt>
        <dd data-testid="worker-id">
          {s.workerId}
          {l.datacenterBits > 0 && <span class="muted"> · datacenter {s.datacenterId}</span>}
        </dd>
        <dt>Lease</dt>
        <dd class={s.status === 'active' ? 'good' : 'warn'}>{STATUS_TEXT[s.status]}</dd>
        <dt>Registry</dt>
        <dd>{s.registry}</dd>
        <dt>Expires in</dt>
        <dd>
          {formatMs(s.expiresInMs)}{' '}
          <span class="muted">
            (fence {time(s.validUntil)}, renewed {time(s.lastRenewedAt)})
          </span>
        </dd>
        <dt>Horizon</dt>
        <dd
          title={
            'Recorded at the registry: nothing this node issues is later, ' +
            'and the next holder of the worker ID starts after it.'
          }
        >
          {time(s.horizon)}
        </dd>
        <dt>Clock vs peers</dt>
        <dd class={skewed ? 'warn' : undefined}>{peerText}</dd>
        <dt>Rollbacks</dt>
        <dd class={s.rollbacks.count > 0 ? 'warn' : undefined}>
          {s.rollbacks.count} seen <span class="muted">· policy {s.rollbacks.policy}</span>
          {s.workerSwitches > 0 && <span class="muted"> · {s.workerSwitches} worker switches</span>}
        </dd>
        <dt>Lease trouble</dt>
        <dd class={s.renewFailures > 0 || s.leaseLosses > 0 ? 'warn' : undefined}>
          {s.renewFailures} failing renewals · {s.leaseLosses} losses
          {s.fencedWaits > 0 && (
            <span class="muted"> · {s.fencedWaits} requests waited for a renewal</span>
          )}
          {s.lastError !== null && <div class="error-text">{s.lastError}</div>}
        </dd>
        <dt>Layout</dt>
        <dd>
          <code>{l.name}</code>{' '}
          <span class="muted">
            {l.timeBits}+{l.datacenterBits}+{l.workerBits}+{l.sequenceBits} bits, {l.timeUnitMs} ms
            units, up to {formatRate(l.maxIdsPerSecond)}, until {l.expiresAt.slice(0, 10)}
          </span>
        </dd>
      </dl>
      <RateChart
        values={s.rates ?? []}
        label="Snowflake IDs per second"
        theme={props.theme}
        height={130}
      />
    </section>
  );
}

import { formatCount, formatMs, formatRate } from '../format.ts';
import type { Status } from '../../contract/status.ts';
import { RateChart } from './chart.tsx';

/** Uptime is in the header; here: health, requests/s and p99 by route, error answers by code. */
export function ServerPanel(props: { readonly server: Status['server']; readonly theme: string }) {
  const { health, requests, errors } = props.server;
  return (
    <section class="panel" aria-labelledby="server-title">
      <h2 id="server-title">Server</h2>
      <ul class="health" aria-label="Health">
        {health.map((check) => (
          <li key={check.name} class={check.ok ? 'ok' : 'bad'}>
            <span class="dot" aria-hidden="true" />
            <span class="name">{check.name}</span>
            <span class="detail">{check.ok ? 'ok' : check.detail}</span>
          </li>
        ))}
      </ul>
      {requests === null ? (
        <p class="muted">Request rates need metrics (metrics.enabled).</p>
      ) : (
        <>
          <h3>
            Requests{' '}
            <span class="figure" data-testid="requests-per-second">
              {formatRate(requests.requestsPerSecond)}
            </span>
          </h3>
          <RateChart
            values={requests.rates}
            label="Requests per second"
            theme={props.theme}
            height={130}
          />
          <div class="scroll">
            <table class="compact">
              <caption class="visually-hidden">Requests by route over the last minute</caption>
              <thead>
                <tr>
                  <th scope="col">Route</th>
                  <th scope="col" class="num">
                    req/s
                  </th>
                  <th scope="col" class="num">
                    p99
                  </th>
                  <th scope="col" class="num">
                    total
                  </th>
                </tr>
              </thead>
              <tbody>
                {requests.routes.slice(0, 8).map((route) => (
                  <tr key={route.route}>
                    <td>
                      <code>{route.route}</code>
                    </td>
                    <td class="num">{formatRate(route.requestsPerSecond, '')}</td>
                    <td class="num">{formatMs(route.p99Ms)}</td>
                    <td class="num">{formatCount(route.requests)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      <h3>Errors</h3>
      {errors.length === 0 ? (
        <p class="muted">No error answers since start.</p>
      ) : (
        <ul class="errors" aria-label="Error answers by code">
          {errors.map((error) => (
            <li key={error.code}>
              <code>{error.code}</code> <span class="num">{formatCount(error.count)}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

/** Colours from the page's CSS variables, so charts follow the light or dark theme. */
function cssColor(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/**
 * A line chart of per-second values over the last minute (uPlot), x in seconds before now. The
 * chart is made once per theme and size; new values only replace its data.
 */
export function RateChart(props: {
  readonly values: readonly number[];
  readonly label: string;
  readonly theme: string;
  readonly height?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const height = props.height ?? 120;
  const data = (values: readonly number[]): uPlot.AlignedData => [
    values.map((_, i) => i - (values.length - 1)),
    [...values],
  ];

  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const axis = {
      stroke: cssColor('--muted'),
      grid: { stroke: cssColor('--grid'), width: 1 },
      ticks: { stroke: cssColor('--grid'), width: 1 },
    };
    const made = new uPlot(
      {
        width: Math.max(200, element.clientWidth),
        height,
        legend: { show: false },
        cursor: { show: false },
        scales: {
          x: { time: false },
          y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        axes: [
          { ...axis, values: (_u, ticks) => ticks.map((t) => (t === 0 ? 'now' : `${t}s`)) },
          { ...axis, size: 56, space: 24, values: (_u, ticks) => ticks.map((t) => compact(t)) },
        ],
        series: [
          {},
          {
            label: props.label,
            stroke: cssColor('--accent'),
            fill: cssColor('--accent-fill'),
            width: 2,
            points: { show: false },
          },
        ],
      },
      data(props.values),
      element,
    );
    chart.current = made;
    const resize = new ResizeObserver(() =>
      made.setSize({ width: Math.max(200, element.clientWidth), height }),
    );
    resize.observe(element);
    return () => {
      resize.disconnect();
      made.destroy();
      chart.current = null;
    };
  }, [props.theme, height, props.label]);

  useEffect(() => {
    chart.current?.setData(data(props.values));
  }, [props.values]);

  return (
    <div class="chart" ref={box} role="img" aria-label={`${props.label} over the last minute`} />
  );
}

function compact(value: number): string {
  if (value >= 1e6) return `${Math.round(value / 1e5) / 10}M`;
  if (value >= 1e3) return `${Math.round(value / 100) / 10}k`;
  return String(Math.round(value * 10) / 10);
}

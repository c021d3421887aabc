import { sparklinePoints } from '../format.ts';

/**
 * A tiny line in a table cell: an SVG polyline, not a uPlot chart, since a page of tags would
 * otherwise redraw fifty canvases every second for a shape this simple.
 */
export function Sparkline(props: {
  readonly values: readonly number[] | null;
  readonly label: string;
}) {
  const width = 96;
  const height = 24;
  if (props.values === null || props.values.length < 2) {
    return (
      <svg
        class="spark"
        width={width}
        height={height}
        role="img"
        aria-label={`${props.label}: no data yet`}
      />
    );
  }
  return (
    <svg
      class="spark"
      width={width}
      height={height}
      viewBox={`0 -1 ${width} ${height + 2}`}
      role="img"
      aria-label={props.label}
    >
      <polyline
        points={sparklinePoints(props.values, width, height)}
        fill="none"
        stroke="currentColor"
        stroke-width="1.5"
        vector-effect="non-scaling-stroke"
      />
    </svg>
  );
}

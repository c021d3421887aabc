// The dashboard's entry point: bundled by scripts/build-dashboard.ts into dist/dashboard/.
import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { App } from './components/app.tsx';

const root = document.getElementById('app');
if (root !== null) {
  root.replaceChildren();
  render(<App />, root);
}

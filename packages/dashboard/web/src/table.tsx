// A table of rows with a caption and column headers (scoped for screen readers), scrolling sideways
// on a narrow screen (a focusable region, so a keyboard can scroll it).

import type { ComponentChildren } from 'preact';

export function Table({ caption, headers, children }: { caption: string; headers: string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={caption} tabIndex={0}>
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {headers.map((h) => (
              <th scope="col" key={h}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

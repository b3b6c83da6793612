// Placeholder: replaced by the page's real implementation in this change.

export function Usage() {
  return (
    <section>
      <h1>Usage</h1>
    </section>
  );
}

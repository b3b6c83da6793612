// Placeholder: replaced by the page's real implementation in this change.

export function Data() {
  return (
    <section>
      <h1>Data</h1>
    </section>
  );
}

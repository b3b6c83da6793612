// Placeholder: replaced by the page's real implementation in this change.

export function Operator() {
  return (
    <section>
      <h1>Operator</h1>
    </section>
  );
}

// Placeholder: replaced by the page's real implementation in this change.

export function Accuracy() {
  return (
    <section>
      <h1>Accuracy</h1>
    </section>
  );
}

// Placeholder: replaced by the page's real implementation in this change.

export function Account() {
  return (
    <section>
      <h1>Account</h1>
    </section>
  );
}

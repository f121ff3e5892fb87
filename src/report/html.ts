// Text into HTML: every prompt, error message and code in the report is user or provider text (a prompt may
// hold `</script>` or quotes), so each goes through here, in element content and in attribute values alike.
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

"""The transaction coordinator: `__transaction_state`, transactional ids, markers (issue 16)."""

"""Results: tables, the papers' tables and checks, the diagnosis of where gold pages were lost."""

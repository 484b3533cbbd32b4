"""The only code that touches a database: schema, engines, migrations, the store."""

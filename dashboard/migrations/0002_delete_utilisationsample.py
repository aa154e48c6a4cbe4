"""UtilisationSample leaves the base app: app data lives in its app.

State only: the table stays, and its new owner's migration renames it and takes the model.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("dashboard", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="UtilisationSample")],
            database_operations=[],
        ),
    ]

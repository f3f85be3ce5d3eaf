"""Typed values users give (order numbers, emails, ids, ...) and how assistants ask for them.

Used by D2 `reask`: user messages fill a slot ledger; assistant sentences that name a slot and
carry a request marker are asks. Everything here is a precompiled regex over plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tracing_eval.metrics.deterministic.lexicons import STOP_WORDS
from tracing_eval.text import Folded, alternatives, could_match, holds_any
from tracing_eval.text import split_sentences as text_sentences

_I = re.IGNORECASE

#: capitalised replies that are not names ("Sure", "No thanks", "Maybe")
NOT_A_NAME: frozenset[str] = STOP_WORDS | frozenset("nope nah maybe later never idk nothing nobody none guess".split())


@dataclass(frozen=True)
class Slot:
    name: str
    #: how an assistant names the slot when asking for it
    asked_as: Folded
    #: values found with a keyword, anywhere in a user message (group 1 is the value)
    keyed: tuple[re.Pattern[str], ...] = ()
    #: values whose shape alone identifies the slot (no keyword needed)
    shaped: re.Pattern[str] | None = None
    #: the shape of a bare value that answers a direct ask for this slot
    bare: re.Pattern[str] | None = None
    #: words in an ask that mean a different value of this kind is wanted (another booking, a return date)
    other: Folded | None = None
    #: how an assistant names the slot in Spanish, French, German, Portuguese or Italian
    asked_as_elsewhere: Folded | None = None
    #: literal pieces (lower case) one of which every match of `asked_as` holds: a cheap gate
    asked_needs: tuple[str, ...] = ()
    #: literal pieces (lower case) one of which every match of a `keyed` pattern holds (() for none)
    keyed_needs: tuple[str, ...] = ()
    #: turns after it was given that a value answers an ask (None: for good). A party size belongs to
    #: one booking, and a conversation books a table, then a taxi, then a train.
    fresh_turns: int | None = None


#: A value with a digit among its (at most 25) characters; the look-ahead reads no further than that,
#: so trying it after each of many connector words does not read a long run to its end each time.
_ID = r"#?\s*+((?=[A-Za-z0-9_-]{0,24}\d)[A-Za-z0-9][A-Za-z0-9_-]{2,24})"
#: The words between a slot's name and its value ("order number is #", "número de pedido es"). Written
#: so that a text has one way to be read: the spaces before each word are that word's, those after the
#: last word are the final `\s*+`'s, and no word is spelled by two alternatives ("no" was both `no\.?` and
#: `n[º°o]\.?`). With the spaces on both sides of each word, "order number - - ... - 1!" was tried
#: every way its spaces split before the value failed: 0.9 s at 18 dashes, doubling with each one more.
_IS = (
    r"(?:(?:\s*+(?:is|was|=|:|-|of|number|num|#|es|era|est|ist|lautet|war|é|è|n[º°o]\.?|n[uú]mero|num[ée]ro"
    r"|nummer|de|del|do|da|di))+\s*+)?"
)

#: The address is group 1: it starts at the first word character of its run of [\w.+-]. The match
#: starts at the run's start only (the look-behind) and never gives back: retrying from every
#: position of a long run before a stray "@" would cost the run's square.
_EMAIL = re.compile(r"(?<![\w.+-])[.+-]*+(\w[\w.+-]*+@[\w-]+(?:\.[\w-]+)+)\b")
_PHONE = re.compile(r"(?<![\w-])\+?\d{0,3}[\s.-]?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}(?![\w-])")
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+\d{4})?"
_DATE = re.compile(
    rf"\b(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?"
    rf"|{_MONTH}\.?\s+{_DAY}{_YEAR}|{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR})\b",
    _I,
)
_BIRTH_CONTEXT = Folded(
    r"\b(?:born|birth|birthday|dob|d\.o\.b|nacimiento|nac[ií]|naissance|née?|geburt\w*|geboren|nascimento|nasci"
    r"|nascita|nat[oa])\b",
)
_USER_ID_SHAPE = re.compile(r"\b[a-z]+(?:_[a-z]+)+_\d{2,}\b")
_RESERVATION_SHAPE = re.compile(r"\b(?![A-Z]{3}\d{3}\b)(?:(?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]{5,8}|[A-Z]{6})\b")
#: A code of 3-25 letters, digits and hyphens with a digit among its first 25 characters (the digit is
#: looked for that far only: a look-ahead over the whole run from every word in "a-b-c-..." would cost
#: the run's square).
_CODE_WITH_DIGIT = re.compile(r"#?\b(?=[A-Za-z0-9-]{0,24}\d)[A-Za-z0-9][A-Za-z0-9-]{2,24}\b")
#: A bare user id: a run of [\w.-] with a digit or "_", from its first to its last word character
#: (group 1), tried from the run's start only, as `_EMAIL` is.
_ID_WITH_DIGIT = re.compile(r"(?<![\w.-])[.-]*+((?=[\w.-]*?[\d_])\w[\w.-]*\b)")
_ZIP = r"(?:\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2})"  # US ZIP(+4) or UK postcode
_ZIP_SHAPE = re.compile(rf"\b{_ZIP}\b")
_NAME_SHAPE = re.compile(r"^\s*(?:it'?s\s+|i'?m\s+|this is\s+)?([A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+){0,3})\s*[.!]?\s*$")

#: a count of people, tickets or seats: a number up to 99, or one written as a word up to twelve
_COUNT = r"(?:\d{1,2}(?![\d:.,/-])|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
#: what is counted: the people (or their tickets and seats) a booking is for
_COUNTED_WORDS = r"people|persons|guests|passengers|travell?ers|adults|diners|tickets|seats"
_COUNTED = f"(?:{_COUNTED_WORDS})"

_PEOPLE = Folded(
    r"\b(?:passengers?|travell?ers?|companions?|friends?|each|every|guests?|child|children|spouse|partner)\b"
)

SLOTS: tuple[Slot, ...] = (
    Slot(
        "order_number",
        Folded(r"\border\s*(?:number|#|id\b|no\b)"),
        keyed=(
            re.compile(
                rf"\b(?:order|pedido|orden|commande|bestellung|bestellnummer|ordine){_IS}#?\s*+"
                r"((?=[A-Za-z0-9-]{0,24}\d)[A-Za-z0-9][A-Za-z0-9-]{4,24})\b",
                _I,
            ),
        ),
        bare=_CODE_WITH_DIGIT,
        asked_as_elsewhere=Folded(
            r"\bn[uú]mero\s+d[eo]\s+(?:pedido|orden)|\bnum[ée]ro\s+de\s+commande|\bbestell(?:nummer|-?nr)"
            r"|\bnumero\s+(?:d'ordine|dell'ordine)",
        ),
        asked_needs=("order",),
        keyed_needs=("order", "pedido", "orden", "commande", "bestell", "ordine"),
    ),
    Slot(
        "email",
        Folded(r"\be-?mail\b"),
        shaped=_EMAIL,
        asked_as_elsewhere=Folded(
            r"\bcorreo(?:\s+electr[oó]nico)?\b|\bcourriel\b|\be-?mail-?adresse\b|\bposta\s+elettronica\b"
        ),
        asked_needs=("mail",),
    ),
    Slot(
        "phone",
        Folded(r"\b(?:phone|mobile|telephone|cell)(?:\s*number)?\b|\bcontact number\b"),
        shaped=_PHONE,
        asked_as_elsewhere=Folded(
            r"\btel[ée]fono\b|\bcelular\b|\bm[oó]vil\b|\bt[ée]l[ée]phone\b|\btelefon(?:nummer)?\b|\bhandynummer\b"
            r"|\btelefone\b|\btelefono\b|\bcellulare\b",
        ),
        asked_needs=("phone", "mobile", "cell", "contact number"),
    ),
    Slot(
        "zip",
        Folded(r"\bzip(?:\s*code)?\b|\bpost(?:al)?\s*code\b"),
        keyed=(re.compile(rf"\b(?:zip(?:\s*code)?|post(?:al)?\s*code){_IS}\s*+({_ZIP})\b", _I),),
        bare=_ZIP_SHAPE,
        asked_as_elsewhere=Folded(r"\bc[oó]digo\s+postal\b|\bcode\s+postal\b|\bpostleitzahl\b|\bcodice\s+postale\b"),
        asked_needs=("zip", "post"),
        keyed_needs=("zip", "post"),
    ),
    Slot(
        "date_of_birth",
        Folded(r"\bdate of birth\b|\bbirth\s*date\b|\bbirthday\b|\bdob\b"),
        bare=_DATE,
        other=_PEOPLE,
        asked_as_elsewhere=Folded(
            r"\bfecha\s+de\s+nacimiento\b|\bdate\s+de\s+naissance\b|\bgeburtsdatum\b|\bdata\s+de\s+nascimento\b"
            r"|\bdata\s+di\s+nascita\b",
        ),
        asked_needs=("birth", "dob"),
    ),
    Slot(
        "date",
        Folded(r"\bdates?\b(?!\s+(?:of\s+birth|de\s+naissance))"),
        shaped=_DATE,
        other=Folded(
            r"\b(?:return|returning|departure|depart|travel|flight|trip|check-?in|check-?out|delivery|arrival|"
            r"expir\w*|preferred|desired|start|end)\b",
        ),
        asked_as_elsewhere=Folded(r"\bfechas?\b(?!\s+de\s+nacimiento)|\bdatum\b"),
        asked_needs=("date",),
    ),
    Slot(
        "user_id",
        Folded(r"\buser\s*+-?\s*+(?:id|name)\b|\busername\b|\blogin\b"),
        keyed=(
            re.compile(
                r"\b(?:user\s*+-?\s*+id|user\s*name|login|usuario|identifiant|benutzer(?:name|-?id)?|usu[aá]rio|utente)"
                rf"{_IS}\s*+((?=[\w.@-]{{3}})(?=[\w.@-]{{0,63}}[\d_])[\w.@-]*\w)",
                _I,
            ),
        ),
        shaped=_USER_ID_SHAPE,
        bare=_ID_WITH_DIGIT,
        asked_as_elsewhere=Folded(
            r"\b(?:id|identificador|nombre)\s+de\s+usuario\b|\bidentifiant\b|\bnom\s+d'utilisateur\b"
            r"|\bbenutzer(?:name|-?id|kennung)\b|\b(?:id|nome)\s+de\s+usu[aá]rio\b|\b(?:id|nome)\s+utente\b",
        ),
        asked_needs=("user", "login"),
        keyed_needs=("user", "login", "usuario", "identifiant", "benutzer", "usu", "utente"),
    ),
    Slot(
        "account_id",
        Folded(r"\b(?:account|customer|member(?:ship)?)\s*(?:number|id|no)\b"),
        keyed=(re.compile(rf"\b(?:account|customer|member(?:ship)?)\s*+(?:number|id|no\.?|#){_IS}{_ID}", _I),),
        bare=_CODE_WITH_DIGIT,
        asked_as_elsewhere=Folded(
            r"\bn[uú]mero\s+de\s+(?:cuenta|cliente|socio)\b|\bnum[ée]ro\s+de\s+(?:compte|client)\b"
            r"|\b(?:konto|kunden)nummer\b|\bn[uú]mero\s+da\s+conta\b|\bnumero\s+di\s+conto\b",
        ),
        asked_needs=("account", "customer", "member"),
        keyed_needs=("account", "customer", "member"),
    ),
    Slot(
        "reservation_id",
        Folded(
            r"\b(?:reservation|booking)\s*(?:id|number|code|no|reference|ref)s?\b"
            r"|\bconfirmation\s*(?:number|code)\b|\bpnr\b",
        ),
        keyed=(
            re.compile(
                r"\b(?:reservation|booking|confirmation|pnr|reserva|localizador|r[ée]servation|buchung\w*"
                r"|reservierung\w*|prenotazione)s?\b[^.?!\n]*",
                _I,
            ),
        ),
        bare=_RESERVATION_SHAPE,
        asked_as_elsewhere=Folded(
            r"\b(?:c[oó]digo|n[uú]mero)\s+d[ea]\s+(?:reserva|confirmaci[oó]n)\b|\blocalizador\b"
            r"|\b(?:num[ée]ro|code)\s+de\s+(?:r[ée]servation|confirmation)\b|\b(?:buchungs|reservierungs)(?:nummer|code)\b"
            r"|\b(?:codice|numero)\s+(?:di\s+)?prenotazione\b",
        ),
        asked_needs=("reservation", "booking", "confirmation", "pnr"),
        keyed_needs=("reserv", "booking", "confirmation", "pnr", "localizador", "buchung", "prenotazione"),
    ),
    Slot(
        "tracking_number",
        Folded(r"\btracking\s*(?:number|id|code)\b"),
        keyed=(re.compile(rf"\btracking\s*+(?:number|id|code)?{_IS}{_ID}", _I),),
        bare=_CODE_WITH_DIGIT,
        asked_as_elsewhere=Folded(
            r"\bn[uú]mero\s+de\s+(?:seguimiento|rastreo|rastreamento)\b|\bnum[ée]ro\s+de\s+suivi\b|\bsendungsnummer\b"
            r"|\bnumero\s+di\s+tracciamento\b",
        ),
        asked_needs=("tracking",),
        keyed_needs=("tracking",),
    ),
    Slot(
        "name",
        Folded(r"\byour\s+(?:full\s+|first\s+|last\s+)?name\b|\bwho am i speaking with\b"),
        keyed=(
            re.compile(
                r"\b(?i:my name is|my name's|call me|me llamo|mi nombre es|je m'appelle|mon nom est|ich heiße"
                r"|mein name ist|meu nome é|me chamo|mi chiamo|il mio nome è)"
                r"\s+([A-ZÁÉÍÓÚÑ][a-záéíóúñüç'-]+(?:\s+[A-ZÁÉÍÓÚÑ][a-záéíóúñüç'-]+){0,3})"
            ),
        ),
        bare=_NAME_SHAPE,
        other=_PEOPLE,
        asked_as_elsewhere=Folded(
            r"\b(?:su|tu)\s+nombre(?:\s+completo)?\b|\bcon\s+qui[eé]n\s+hablo\b|\bvotre\s+nom\b|\bihren?\s+namen?\b"
            r"|\b(?:seu|teu)\s+nome\b|\bil\s+(?:suo|tuo)\s+nome\b",
        ),
        asked_needs=("name", "speaking with"),
        keyed_needs=("name", "call me", "llamo", "nombre", "appelle", "nom", "hei", "chamo", "chiamo"),
    ),
    Slot(
        "party_size",
        Folded(rf"\bhow many {_COUNTED}\b|\bparty size\b|\bnumber of {_COUNTED}\b|\bhow many of you\b"),
        keyed=(
            re.compile(rf"\b({_COUNT})\s+(?:{_COUNTED_WORDS}|of us)\b", _I),
            re.compile(rf"\b(?:party|group|table)\s+(?:of|for)\s+({_COUNT})\b", _I),
        ),
        bare=re.compile(
            rf"^\W*(?:(?:just|only|for|we are|we're|there are|there will be)\s+)?({_COUNT})"
            rf"(?:\s+(?:{_COUNTED}|of us))?(?:,?\s+please)?\W*$",
            _I,
        ),
        # an ask that names the service ("How many people in the taxi?") is for that booking, maybe another
        other=Folded(
            r"\b(?:more|fewer|reduce|smaller|larger|bigger|child(?:ren)?|kids|infants?"
            r"|taxi|cab|ride|train|bus|hotel|room|restaurant|table|flight|car|event|show|concert|movie)s?\b"
        ),
        asked_needs=("how many", "party size", "number of"),
        fresh_turns=1,
        keyed_needs=(
            *"people person guest passenger travel adult diner ticket seat party group table".split(),
            "of us",
        ),
    ),
)

SLOT_BY_NAME = {s.name: s for s in SLOTS}

#: cheap pre-filters: a sentence that fails them cannot name a slot / give a value
_ANY_SLOT_NAME = Folded("|".join(f"(?:{s.asked_as.pattern})" for s in SLOTS))
_ANY_SLOT_NAME_ELSEWHERE = Folded(
    "|".join(f"(?:{s.asked_as_elsewhere.pattern})" for s in SLOTS if s.asked_as_elsewhere is not None)
)
_MAYBE_VALUE_MARK = re.compile(r"[\d@]")
_MAYBE_VALUE_WORD = Folded(
    r"\b(?:reservation|booking|confirmation|pnr|name|call me|user|login|reserva|localizador|llamo|nombre"
    r"|usuario|r[ée]servation|appelle|nom\b|buchung|reservierung|heiße|prenotazione|chiamo|chamo|usu[aá]rio|utente"
    rf"|{_COUNTED_WORDS}|party|group|table)"
)


def _maybe_value(sentence: str) -> bool:
    """A digit, an `@` or a keyword of a keyed slot: without one a sentence gives no value."""
    return bool(_MAYBE_VALUE_MARK.search(sentence) or _MAYBE_VALUE_WORD.search(sentence))


#: sentence markers that turn a slot mention into a direct request for it
REQUEST = Folded(
    r"\bplease\s+(?:provide|share|enter|send|give|tell|confirm|specify|type|let me know)"
    r"|\b(?:could|can|would|will)\s+you\s+(?:please\s+)?(?:provide|share|confirm|give|tell|send|specify|enter|type"
    r"|let me know|double[- ]check|check|verify|re-?enter|re-?type)"
    r"|\bwhat(?:'s|\s+is|\s+was|\s+are)\s+(?:your|the)\b"
    r"|\bmay i (?:have|get|ask)\b|\b(?:can|could) i (?:please\s+)?(?:have|get)\s+(?:your|the)\b"
    r"|\bmind\s+(?:sharing|providing|giving|telling|sending|confirming|entering|typing|letting)"
    r"|\bkindly\s+(?:provide|share|send|give|tell|confirm|enter|type|specify)|\btrouble you for\b"
    r"|\b(?:was|is)\s*\?\s*$"
    r"|\bwho am i speaking with\b"
    r"|^\W*(?:and\s+|also\s+|so\s+|y\s+)?(?:what|which|cu[aá]l|qu[ée]|quel(?:le)?|welche[rs]?|qual|quale)\b[^?]*\?\s*$"
    r"|\bhow many\b[^?.!]*\?\s*$"
    r"|\blet me know\s+(?:your|the)\b"
    # es
    r"|\b(?:me\s+)?(?:podr[ií]as?|puedes?|puede\s+usted)\s+(?:por favor\s+)?(?:me\s+)?(?:indicar|dar|proporcionar|facilitar"
    r"|compartir|confirmar|decir|enviar|escribir|verificar)\w*"
    r"|\bpor\s+favor,?\s+(?:ind[ií]que|proporcione|env[ií]e|comparta|facilite|d[ée]me|dime|confirme|escriba)\w*"
    r"|\b(?:ind[ií]queme|proporci[oó]neme|facil[ií]teme|d[ií]game|comp[aá]rtame|ind[ií]came|dame)\b"
    r"|\bcu[aá]l\s+es\s+(?:su|tu|el|la)\b"
    # fr
    r"|\bpourriez-vous\s+(?:me\s+)?(?:donner|fournir|indiquer|communiquer|confirmer|envoyer)"
    r"|\bquel(?:le)?\s+est\s+votre\b|\b(?:merci\s+de|veuillez)\s+(?:me\s+)?(?:donner|fournir|indiquer|communiquer"
    r"|saisir|confirmer)"
    # de
    r"|\bkönnten\s+sie\s+mir\s+(?:bitte\s+)?(?:\S+\s+){0,3}?(?:geben|nennen|mitteilen|schicken|bestätigen)"
    r"|\bwie\s+lautet\s+ihre?\b|\bwas\s+ist\s+ihre?\b|\bbitte\s+(?:geben|nennen|teilen)\s+sie"
    # pt
    r"|\b(?:poderia|pode|podes)\s+(?:me\s+)?(?:informar|dar|fornecer|passar|confirmar|enviar|indicar)\w*"
    r"|\bqual\s+(?:é\s+)?(?:o\s+seu|a\s+sua)\b|\bpor\s+favor,?\s+(?:informe|forneça|envie|indique|confirme)"
    # it
    r"|\b(?:potrebbe|può|potresti|puoi)\s+(?:per favore\s+)?(?:darmi|fornirmi|indicarmi|comunicarmi|confermar\w*"
    r"|inviarmi|dirmi)|\bqual\s*(?:è|'è)\s+(?:il|la)\s+(?:suo|sua|tuo|tua)\b"
    r"|\bper\s+favore,?\s+(?:mi\s+)?(?:indichi|fornisca|invii|confermi)",
)
#: a statement of what is needed ("I'll need your user ID"): an ask, but a weaker one
NEED = Folded(
    r"\b(?:i'?ll|i will|i'd|i would|we'?ll|we will|i|we)\s+(?:also\s+|still\s+)?need\b"
    r"|\b(?:necesito|necesitar[ée]|necesitamos)\b|\bj'ai\s+besoin\b|\bich\s+(?:benötige|brauche)\b"
    r"|\b(?:preciso|precisarei|precisamos)\b|\bho\s+bisogno\b",
)
_QUESTION = re.compile(r"\?\s*$")


#: what makes a match in a sentence differ from one in the whole text: anchors and look-arounds
_CONTEXT_MARKS = ("^", "$", "(?=", "(?!", "(?<", "\\A", "\\Z", "\\B")
_CHAR_CLASS = re.compile(r"\[(?:\\.|[^\]])*\]")


def _unanchored(source: str) -> str:
    """The alternatives of `source` that are not tied to where a sentence ends (which all need a "?");
    import fails if one of them tests its context, for which `could_ask` would not hold."""
    kept = [a for a in alternatives(source) if not a.endswith(r"\?\s*$")]
    if any(mark in _CHAR_CLASS.sub("", a) for a in kept for mark in _CONTEXT_MARKS):
        raise ValueError("a request form that tests its context: `could_ask` would not hold for it")
    return "|".join(kept)


#: `REQUEST` and `NEED` without the forms that need a "?": for `could_ask`
_ASK_MARK = Folded(f"{_unanchored(REQUEST.pattern)}|{_unanchored(NEED.pattern)}")
_REQUEST_VERB = Folded(
    r"\b(?:provide|share|give|tell|send|enter|type|specify|know|have|confirm)\b"
    r"|\b(?:proporcion|indic|facilit|d[ae]r|confirm(?!a[tcçz])|envi|compart|escrib|fourni|donn|communiqu|geben|nennen"
    r"|mitteilen|inform(?!ation)|fornec|pass|fornir|comunic)\w*",
)  # not the nouns: "Did you get the confirmation email?" asks for nothing
_OFFER = Folded(
    r"\bwould you like\b|\bdo you want\b|\bshall i\b|\ble\s+gustar[ií]a\b|\b(?:quiere|desea)\b|\bvoulez-vous\b"
    r"|\bsouhaitez-vous\b|\bmöchten\s+sie\b|\b(?:gostaria|deseja)\b|\b(?:vuole|desidera)\b",
)
#: a qualifier that means a different value of the same kind is wanted (another booking, a new date)
OTHER_VALUE = Folded(
    r"\b(?:other|another|new|different|additional|second|next|remaining|alternative|correct|own"
    r"|otr[oa]s?(?!\s+vez)|(?<!\bde\s)nuev[oa]s?|diferente|adicional|segund[oa]|autre|(?<!\bde\s)nouve(?:au|lle)|différente?|andere[nrs]?|neue[nrs]?"
    r"|outr[oa](?!\s+vez)|(?<!\bde\s)nov[oa]|altr[oa](?!\s+volta)|nuov[oa]|divers[oa])\b",
)
_CONFIRM_WORDS = r"\b(?:confirm|correct|verify|right|double[- ]check|make sure|is that|is this|just to be sure)\b"
#: words that make an ask echoing the known value a confirmation
CONFIRM = Folded(rf"{_CONFIRM_WORDS}|\?")
#: the same without a bare question mark: an ask that confirms a value its message wrote before it
#: ("I'll send it to ann@example.com. Can you confirm that email?")
CONFIRM_WORD = Folded(_CONFIRM_WORDS)
NOT_FOUND = Folded(
    r"\b(?:not\s+(?:be\s+)?found|could(?:n'?t| not)\s+(?:find|locate|verify|match)"
    r"|can(?:'?t|not)\s+(?:find|locate|verify)|unable\s+to\s+(?:find|locate|verify|retrieve)"
    r"|no\s+(?:record|match|account|order|reservation|booking)s?\b"
    r"|does(?:n'?t| not)\s+(?:match|exist|seem to (?:match|exist))|did(?:n'?t| not)\s+match"
    r"|invalid|incorrect|not\s+valid|not\s+associated|not\s+recogni[sz]ed|seems?\s+to\s+be\s+(?:wrong|incorrect)"
    r"|wrong|misunderstanding|mix-?up)\b",
)
NOT_FOUND_ELSEWHERE = Folded(
    r"\b(?:no\s+(?:se\s+)?(?:encontr\w*|pud[eo]\s+encontrar|existe|coincide)|inv[aá]lid[oa]|incorrect[oa]|introuvable"
    r"|n'existe\s+pas|nicht\s+gefunden|ungültig|falsch|não\s+(?:foi\s+)?encontrad[oa]|non\s+(?:è\s+stat[oa]\s+)?trovat[oa]"
    r"|non\s+valid[oa]|errat[oa])\b",
)
USER_CORRECTION = Folded(r"\b(?:typo|mistake|wrong|incorrect|mistyped|sorry,? i meant|i meant)\b")
USER_CORRECTION_ELSEWHERE = Folded(
    r"\b(?:me\s+equivoqu[ée]|equivocad[oa]|quise\s+decir|je\s+me\s+suis\s+tromp[ée]e?|vertippt|me\s+enganei|errei"
    r"|mi\s+sono\s+sbagliat[oa])\b",
)
#: a user taking a value back: "I don't have the reservation ID", "that was the wrong number"
USER_RETRACTION = Folded(
    r"\b(?:do(?:n'?t| not)\s+(?:have|know|remember|recall)|can(?:'?t|not)\s+(?:find|remember|recall)|forgot|"
    r"not sure|wrong|incorrect|mistake|typo)\b",
)
USER_RETRACTION_ELSEWHERE = Folded(
    r"\b(?:no\s+(?:tengo|s[ée]|recuerdo)|olvid[ée]|no\s+estoy\s+segur[oa]|je\s+n'ai\s+pas|ich\s+habe\s+keine"
    r"|não\s+tenho|não\s+sei|non\s+ho|non\s+so)\b",
)
#: a user saying they have more than one value of a kind ("I have two orders", "my other booking", "a
#: different email"): an ask for that kind may want the other one. Group 1 names the kind (`SEVERAL_OF`).
SEVERAL = Folded(
    r"\b(?:two|three|2|3|both|several|multiple|another|other|second|separate|different)\s+(?:\w+\s+)?"
    r"(orders?|bookings?|reservations?|accounts?|e-?mails?|phones?)\b"
)
SEVERAL_NEEDS = ("order", "booking", "reservation", "account", "mail", "phone")
#: the slot of each kind `SEVERAL` names, by its first three letters
SEVERAL_OF = {
    "ord": "order_number", "boo": "reservation_id", "res": "reservation_id", "acc": "account_id", "e-m": "email",
    "ema": "email", "pho": "phone",
}  # fmt: skip
_NORMALISE_VALUE = re.compile(r"[^a-z0-9@]")
_DIGIT = re.compile(r"\d")


#: Literal pieces (lower case) one of which every match of the English pattern holds, for `could_match`.
#: Keep in step with the patterns: each alternative must contain one of its pieces.
NOT_FOUND_NEEDS = (
    "found", "find", "locate", "verify", "match", "retrieve", "record", "account", "order", "reservation",
    "booking", "exist", "valid", "incorrect", "associated", "recogni", "wrong", "misunderstanding", "mix",
)  # fmt: skip
USER_CORRECTION_NEEDS = ("typo", "mistake", "wrong", "incorrect", "mistyped", "meant")
USER_RETRACTION_NEEDS = (
    "have", "know", "remember", "recall", "find", "forgot", "not sure", "wrong", "incorrect", "mistake", "typo",
)  # fmt: skip
SLOT_NAME_NEEDS = (
    "order", "mail", "phone", "mobile", "cell", "contact", "zip", "post", "birth", "dob", "date", "user", "login",
    "account", "customer", "member", "reservation", "booking", "confirmation", "pnr", "tracking", "name",
    "speaking with", "how many", "party size", "number of",
)  # fmt: skip


@lru_cache(maxsize=4096)  # the replies and tool results of the threads open at once: read again per turn
def not_found(text: str, *, elsewhere: bool = False) -> bool:
    """The text says a value was not found, is invalid or wrong; `elsewhere` adds the other languages."""
    return bool(
        (could_match(text, NOT_FOUND_NEEDS) and NOT_FOUND.search(text))
        or (elsewhere and NOT_FOUND_ELSEWHERE.search(text))
    )


def user_corrects(text: str, *, elsewhere: bool = False) -> bool:
    """The user says a value they gave was wrong ("typo", "I meant")."""
    return bool(
        (could_match(text, USER_CORRECTION_NEEDS) and USER_CORRECTION.search(text))
        or (elsewhere and USER_CORRECTION_ELSEWHERE.search(text))
    )


def user_retracts(text: str, *, elsewhere: bool = False) -> bool:
    """The user takes a value back ("I don't have the reservation ID", "that was the wrong number")."""
    return bool(
        (could_match(text, USER_RETRACTION_NEEDS) and USER_RETRACTION.search(text))
        or (elsewhere and USER_RETRACTION_ELSEWHERE.search(text))
    )


def several(text: str) -> tuple[str, ...]:
    """The slots a user message says they have more than one value of (`SEVERAL`)."""
    if not could_match(text, SEVERAL_NEEDS):
        return ()
    found = {SEVERAL_OF.get(m.group(1)[:3].casefold(), "") for m in SEVERAL.finditer(text)}  # "ſ" folds to "s"
    return tuple(sorted(found - {""}))


_NUMBER_WORDS = {
    w: str(k) for k, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}


def norm_value(value: str) -> str:
    """Canonical form of a value for comparisons: lower case, letters and digits only, a number word
    as its digits ("three" and "3" are one count)."""
    low = _NORMALISE_VALUE.sub("", value.lower())
    return _NUMBER_WORDS.get(low, low)


_VALUE_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-_.+@/#]*[A-Za-z0-9]|[A-Za-z0-9]")


def mentions_value(text: str, value: str) -> bool:
    """True when `value` occurs in `text` as a whole token (`A48213` is not inside `1Z84A4821300000001`)."""
    wanted = norm_value(value)
    return bool(wanted) and any(norm_value(tok) == wanted for tok in _VALUE_TOKEN.findall(text))


def split_sentences(text: str) -> list[str]:
    """Sentences end at . ? ! followed by white space, or at a line break (emails keep their dots), but
    not at "no." or "nr." before a number: "order no. 558123" is one sentence."""
    out: list[str] = []
    for piece in text_sentences(text):
        if out and piece[0] in _NUMBER_START and out[-1][-4:].lower() in (" no.", " nr."):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


_NUMBER_START = frozenset("0123456789#")


def _reservation_values(text: str) -> Iterator[str]:
    for clause in SLOT_BY_NAME["reservation_id"].keyed[0].finditer(text):
        yield from _RESERVATION_SHAPE.findall(clause.group(0))


def values_in(text: str) -> Iterator[tuple[str, str]]:
    """Every (slot, value) a user message gives by keyword or by an unmistakable shape.

    On ASCII text a pattern is skipped when the sentence lacks what each of its matches holds: one of
    the slot's `keyed_needs`, a digit (dates, phones), `@` (emails) or `_` (user ids)."""
    for sentence in split_sentences(text):
        if not _maybe_value(sentence):
            continue
        birth = bool(_BIRTH_CONTEXT.search(sentence))
        if sentence.isascii():
            low = sentence.lower()
            digit = _DIGIT.search(sentence) is not None
            shaped = {"email": "@" in sentence, "phone": digit, "date": digit, "user_id": "_" in sentence}
        else:
            low, digit, shaped = "", True, {}
        for slot in SLOTS:
            keyed = not low or holds_any(low, slot.keyed_needs)
            if slot.name == "reservation_id":
                if keyed:
                    for value in _reservation_values(sentence):
                        yield slot.name, value
                continue
            if slot.name == "date_of_birth":
                if birth and digit:
                    for m in _DATE.finditer(sentence):
                        yield slot.name, m.group(0)
                continue
            if slot.name == "date" and birth:
                continue
            if keyed:
                for pattern in slot.keyed:
                    for m in pattern.finditer(sentence):
                        yield slot.name, m.group(1).strip(" .,-")
            if slot.shaped is not None and shaped.get(slot.name, True):
                for m in slot.shaped.finditer(sentence):
                    yield slot.name, m.group(m.re.groups and 1).strip()


def wants_other_value(slot_name: str, sentence: str) -> bool:
    """True when the ask is for a different value of the slot's kind, not the one already given."""
    other = SLOT_BY_NAME[slot_name].other
    return bool(OTHER_VALUE.search(sentence) or (other is not None and other.search(sentence)))


def bare_value(slot_name: str, text: str) -> str | None:
    """The value of a short reply that answers a direct ask for `slot_name`, if it has one."""
    slot = SLOT_BY_NAME[slot_name]
    if slot.bare is None or len(text) > 160:
        return None
    m = slot.bare.search(text)
    if m is None:
        return None
    value = (m.group(1) if m.groups() else m.group(0)).strip(" #.,")
    if slot_name == "name" and any(w.lower() in NOT_A_NAME for w in value.split()):
        return None
    return value


def could_name_a_slot(text: str, *, elsewhere: bool = False) -> bool:
    """False when no part of `text` names a slot: then `named_slots` of each of its sentences is empty
    (a sentence is a piece of the text, and no slot name is anchored to where a text starts)."""
    if could_match(text, SLOT_NAME_NEEDS) and _ANY_SLOT_NAME.search(text):
        return True
    return elsewhere and bool(_ANY_SLOT_NAME_ELSEWHERE.search(text))


def could_ask(text: str) -> bool:
    """False when no sentence of `text` is a request or a statement of need (`asked_slots`): the forms
    tied to a sentence's end need a "?", and the others match the text wherever they match a sentence
    of it (a sentence is a piece of the text between white space, and they test no more context)."""
    return "?" in text or bool(_ASK_MARK.search(text))


def named_slots(text: str, *, elsewhere: bool = False) -> list[str]:
    """Slots a text mentions by name (`order number`, `email`, ...); `elsewhere` adds the other languages."""
    if not could_match(text, SLOT_NAME_NEEDS) or not _ANY_SLOT_NAME.search(text):
        english: set[str] = set()
    elif text.isascii():  # each slot's pattern only where one of its pieces is in the text
        low = text.lower()
        english = {s.name for s in SLOTS if holds_any(low, s.asked_needs) and s.asked_as.search_lower(low)}
    else:
        english = {s.name for s in SLOTS if s.asked_as.search(text)}
    if elsewhere and _ANY_SLOT_NAME_ELSEWHERE.search(text):
        english |= {s.name for s in SLOTS if s.asked_as_elsewhere is not None and s.asked_as_elsewhere.search(text)}
    return [s.name for s in SLOTS if s.name in english] if english else []


@lru_cache(maxsize=1024)  # an ask is read twice (is it an ask, does it name a new slot)
def is_request(sentence: str) -> bool:
    """A direct request: a request phrase, or a question with a request verb that is not an offer."""
    if REQUEST.search(sentence):
        return True
    return bool(_QUESTION.search(sentence) and _REQUEST_VERB.search(sentence) and not _OFFER.search(sentence))


def asked_slots(sentence: str, *, elsewhere: bool = False) -> list[str]:
    """Slots a single assistant sentence asks for (a slot mention plus a request or need marker)."""
    named = named_slots(sentence, elsewhere=elsewhere)
    if not named:
        return []
    if "date_of_birth" in named and "date" in named:
        named.remove("date")
    return named if is_request(sentence) or NEED.search(sentence) else []


def offered_values(slot_name: str, sentence: str) -> bool:
    """True when the ask itself lists candidate values (a choice, not a re-ask)."""
    if slot_name == "reservation_id":
        return bool(_RESERVATION_SHAPE.search(sentence))
    slot = SLOT_BY_NAME[slot_name]
    pattern = slot.shaped or slot.bare
    if slot_name in ("name", "date", "date_of_birth") or pattern is None:
        return False
    return bool(pattern.search(sentence))
